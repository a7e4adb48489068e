"""The errors abstract-qa raises. Every message says what the user can do about it.

Each class carries what every front does with it, so the CLI, the HTTP API, the MCP server and
the app tell the same failure apart the same way: ``code`` (a stable name, the HTTP error body's
``error`` field), ``http_status`` and ``exit_code`` (the CLI's). README, "Errors", lists them.
"""

from __future__ import annotations


class AQAError(Exception):
    """Base class: the CLI prints the message as one line, the UI as ``st.error``."""

    code = "error"
    http_status = 500
    exit_code = 1


class InputError(AQAError):
    """No input could be read (a single bad record is reported, not raised)."""

    code = "bad_input"
    http_status = 400
    exit_code = 2


class PaperNotFoundError(InputError):
    """No paper has the id asked for."""

    code = "paper_not_found"
    http_status = 404
    exit_code = 3

    def __init__(self, paper_id: str, *more: str) -> None:
        ids = ", ".join(repr(p) for p in (paper_id, *more))
        super().__init__(
            f"No paper with id {ids} in the index: use an id as `ask --json` or `stats` shows it."
        )
        self.paper_id = paper_id


class NoMatchError(InputError):
    """No indexed paper matches a topic (an evidence table's rows)."""

    code = "no_matching_paper"
    http_status = 404
    exit_code = 3


class StoreError(AQAError):
    """The index cannot be used as it is."""

    code = "store_error"


class IndexNotFoundError(StoreError):
    """There is no index (no collection) under the configured name yet."""

    code = "index_missing"
    http_status = 424
    exit_code = 4


class EmptyIndexError(StoreError):
    """The index exists but holds no papers."""

    code = "index_empty"
    http_status = 409
    exit_code = 5


class IndexMismatchError(StoreError):
    """The index was built with another embedding model than the one configured."""

    code = "embedding_model_mismatch"
    http_status = 500
    exit_code = 6


class StoreUnreachableError(StoreError):
    """The Chroma server cannot be reached (down, wrong host or port, network)."""

    code = "store_unreachable"
    http_status = 503
    exit_code = 7


class ProviderError(AQAError):
    """The language-model provider failed: no key, unreachable, timed out, rate limited."""

    code = "provider_failed"
    http_status = 502
    exit_code = 8


class ConfigError(AQAError):
    """A setting is missing, malformed or contradicts another."""

    code = "bad_config"
    http_status = 500
    exit_code = 9


class ModelFileError(ConfigError):
    """A model file the package ships (the answer selector) is missing or unreadable."""

    def __init__(self, path: object, why: str, rebuild: str) -> None:
        super().__init__(f"The model file {path}: {why}. Rebuild it with `{rebuild}`.")


ERRORS: tuple[type[AQAError], ...] = (
    InputError,
    PaperNotFoundError,
    NoMatchError,
    IndexNotFoundError,
    EmptyIndexError,
    IndexMismatchError,
    StoreUnreachableError,
    ProviderError,
    ConfigError,
)
"""Every error a front may meet, for its documentation (the OpenAPI schema, the README)."""

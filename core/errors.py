"""The errors abstract-qa raises. Every message says what the user can do about it."""


class AQAError(Exception):
    """Base class: the CLI prints the message as one line, the UI as ``st.error``."""


class ConfigError(AQAError):
    """A setting is missing, malformed or contradicts another."""


class IndexMismatchError(AQAError):
    """The index was built with another embedding model than the one configured."""


class EmptyIndexError(AQAError):
    """There is nothing to search yet."""


class InputError(AQAError):
    """No input could be read (a single bad record is reported, not raised)."""


class ProviderError(AQAError):
    """The language-model provider failed: no key, unreachable, timed out, rate limited."""

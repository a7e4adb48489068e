"""Prompt templates live as files in `prompts/` (a package, so they ship in the wheel and are
found through it); each is checked against its allowed variables."""

from __future__ import annotations

import string
from functools import cache
from pathlib import Path

from core.errors import ConfigError

# The `prompts` package installs beside `app` (site-packages/prompts, or the checkout's prompts/).
# Found by path, not by importing it: Streamlit puts app/ first on sys.path, where `prompts`
# would be this module.
PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"

VARIABLES: dict[str, set[str]] = {
    "answer.system": {"refusal"},
    "answer.user": {"sources", "question"},
    "condense.user": {"history", "question"},
    "judge.user": {"sources", "question", "answer"},
    "table.system": {"not_stated"},
    "table.user": {"title", "abstract", "columns"},
}


@cache
def load_prompt(name: str, directory: Path = PROMPTS_DIR) -> str:
    """The template text; an unknown ``{variable}`` or a bad brace is a ConfigError."""
    path = directory / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"Prompt template {path} cannot be read: {exc}") from exc
    allowed = VARIABLES.get(name, set())
    try:
        used = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
    except ValueError as exc:
        raise ConfigError(
            f"Prompt template {path} is malformed ({exc}); write {{{{ for a brace."
        ) from exc
    unknown = used - allowed
    if unknown:
        raise ConfigError(
            f"Prompt template {path} uses unknown variable(s) {sorted(unknown)}; "
            f"allowed: {sorted(allowed)}. Write {{{{ and }}}} for literal braces."
        )
    return text

"""Text helpers every step shares: LaTeX-to-plain normalisation, sentence spans, derived titles.

The stored abstract keeps its LaTeX; `plain_text` is what is embedded, searched and displayed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import unicodedata
from functools import lru_cache

from pylatexenc.latex2text import LatexNodes2Text

# pylatexenc logs a warning for every macro it cannot expand (e.g. \frac with odd arguments);
# it still returns usable text, so those warnings are noise to the user.
logging.getLogger("pylatexenc").setLevel(logging.ERROR)

_UNESCAPED_PERCENT = re.compile(r"(?<!\\)%")
_SPACES = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _latex() -> LatexNodes2Text:
    return LatexNodes2Text(math_mode="text", strict_latex_spaces=False)


def has_latex(text: str) -> bool:
    return "\\" in text or "$" in text


def plain_text(text: str) -> str:
    """LaTeX markup turned into readable Unicode: ``40\\%`` -> ``40%``, ``\\emph{x}`` -> ``x``."""
    if has_latex(text):
        # A bare % starts a LaTeX comment; in an abstract it means percent, so keep it.
        escaped = _UNESCAPED_PERCENT.sub(r"\\%", text)
        # pylatexenc is lenient; on anything it cannot parse, keep the source text
        with contextlib.suppress(Exception):
            text = _latex().latex_to_text(escaped)
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def fingerprint(*parts: str) -> str:
    """A short stable hash of text (used for ids of untitled papers and content hashes)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()[:16]


def normalise_for_id(abstract: str) -> str:
    """Case, spacing and LaTeX differences do not make a different paper."""
    return plain_text(abstract).casefold()


# A sentence ends at . ! ? (optionally followed by a closing quote or bracket) and whitespace,
# when the next word starts like a sentence, and the period does not close a common abbreviation.
_ABBREVIATIONS = (
    "e.g",
    "i.e",
    "et al",
    "etc",
    "vs",
    "cf",
    "fig",
    "figs",
    "eq",
    "eqs",
    "sec",
    "approx",
    "resp",
    "dr",
    "mr",
    "ms",
    "no",
    "al",
    "viz",
    "ref",
)
_BOUNDARY = re.compile(r"""[.!?]["')\]]*\s+(?=["'(\[]?[A-Z0-9$\\])""")
_ABBREV_TAIL = re.compile(
    r"(?:\b(?i:" + "|".join(re.escape(a) for a in _ABBREVIATIONS) + r")|\b[A-Z])\.$"
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``, in order, leading/trailing spaces excluded."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        head = text[start : match.start() + 1]
        if text[match.start()] == "." and _ABBREV_TAIL.search(head):
            continue
        spans.append((start, match.start() + len(match.group(0).rstrip())))
        start = match.end()
    spans.append((start, len(text)))
    return [_strip_span(text, s, e) for s, e in spans if text[s:e].strip()]


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def derive_title(abstract: str, max_chars: int = 90) -> str:
    """A display title for a paper that has none: the start of its first sentence."""
    text = plain_text(abstract)
    spans = sentence_spans(text)
    first = text[spans[0][0] : spans[0][1]] if spans else text
    first = first.rstrip(".")
    if len(first) <= max_chars:
        return first
    cut = first[:max_chars].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"

"""Turning retrieved papers into numbered sources, and a model's text into checked citations."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from app.query import question as q
from core.models import Citation, Source
from core.text import sentence_spans
from core.tokens import count_tokens, words

CANNOT_ANSWER = "I cannot answer this from the indexed abstracts."
"""The one refusal sentence: providers say it, code and the evaluation check for it."""

# "The abstract of *i-RevNet* [1] does not state its top-1 accuracy.": the paper asked about is
# found, the detail asked for is not in its abstract. Every provider says it so (the answer
# prompt asks for it); the answer cites the paper and counts as abstained.
_NOT_STATED = re.compile(
    r"^(?:The|Its) (?:abstract|source)\b[^.!?]{0,300}?\bdoes not (?:state|report|give|mention)\b"
    r"[^.!?]*[.!?]?$",
    re.IGNORECASE,
)

_MARKER = re.compile(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]")
_TRAILING_MARKERS = re.compile(r"\s*([.!?])\s*((?:\[\d+\])+)")
# the sentence without its subject, so "We cannot answer ..." and "It cannot ..." count too
_REFUSAL = re.compile(re.escape(CANNOT_ANSWER.removeprefix("I ").rstrip(".")), re.IGNORECASE)


def defuse(text: str) -> str:
    """Source text made unable to act as output syntax: a citation-shaped ``[7]`` in an abstract
    becomes ``(7)``, and the refusal sentence loses its meaning as a sentinel. Applied to what a
    model reads and to what the extractive answerer quotes; the displayed source is unchanged."""
    text = _MARKER.sub(lambda m: f"({m.group(1)})", text)
    return _REFUSAL.sub(lambda m: m.group(0)[:3] + " " + m.group(0)[3:], text)  # "can not"


def subject(source: Source, mentioned: int) -> str:
    """How the answer names a paper: its title, or the name the abstract introduces, or
    "One paper" / "Another paper" for an untitled one."""
    if not source.title_derived and source.title.strip():
        return f"*{defuse(source.title.strip())}*"
    seen = ""
    for start, end in sentence_spans(source.text)[:5]:
        sentence = source.text[start:end]
        if cue := q.NAMING.search(sentence):
            # the name the cue introduces ("we propose DecDTW", "a method called DASHA"): the
            # first after the cue that the abstract has not used before ("a DTW layer")
            tail = sentence[cue.start() :]
            new = [n for n in sorted(q.names(tail), key=tail.find) if n not in seen]
            if new:
                return defuse(new[0])
            m = re.search(r"\b(?:propose|introduce|present)s?\s+([A-Z][a-z]{2,}[\w-]*)[,( ]", tail)
            if m:
                return defuse(m.group(1))
        seen += sentence
    return "One paper" if mentioned == 0 else "Another paper"


def format_sources(
    sources: list[Source], budget_tokens: int, evidence: dict[int, list[str]] | None = None
) -> tuple[str, list[Source]]:
    """The sources block for a prompt, within ``budget_tokens``; lowest-ranked dropped first.
    ``evidence``: for a source's marker, the sentences of its abstract most likely to answer
    (the answer selector's), given first in its block.

    Source text is escaped so it cannot close its own tag or pose as markup.
    """
    blocks: list[str] = []
    used: list[Source] = []
    total = 0
    for source in sources:
        meta = ", ".join(str(x) for x in (source.venue, source.year) if x)
        title = "(untitled)" if source.title_derived else source.title
        head = html.escape(defuse(title + (f" ({meta})" if meta else "")), quote=False)
        first = "".join(
            f"Evidence: {html.escape(defuse(sentence), quote=False)}\n"
            for sentence in (evidence or {}).get(source.marker, [])
        )
        block = (
            f'<source id="{source.marker}">\nTitle: {head}\n{first}'
            f"{html.escape(defuse(source.text), quote=False)}\n</source>"
        )
        cost = count_tokens(block)
        if used and total + cost > budget_tokens:
            break
        blocks.append(block)
        used.append(source)
        total += cost
    return "\n".join(blocks), used


def is_refusal(text: str) -> bool:
    """Whether a text refuses: the refusal sentence, or that no abstract mentions the name."""
    return bool(_REFUSAL.search(text)) or is_not_mentioned(text)


def not_stated(source: Source, what: str, name: str = "") -> str:
    """The answer when the paper asked about is found but its abstract lacks the detail: the
    paper named by its title, else as the question names it (``name``)."""
    who = subject(source, 0) if not source.title_derived else defuse(name)
    named = f"of {who} " if who else ""
    return f"The abstract {named}[{source.marker}] does not state {what}."


def not_mentioned(name: str) -> str:
    """The answer to a question about a name no indexed abstract or title mentions."""
    return f"No indexed abstract mentions {defuse(name)}."


def is_not_mentioned(text: str) -> bool:
    return bool(_NOT_MENTIONED.match(" ".join(text.split())))


_NOT_MENTIONED = re.compile(r"^No indexed abstract mentions [^\n]{1,200}\.$")


def is_not_stated(text: str) -> bool:
    """Whether an answer says only that the source lacks the detail asked for."""
    return bool(_NOT_STATED.match(" ".join(text.split())))


@dataclass
class Checked:
    text: str
    citations: list[Citation] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    uncited: list[str] = field(default_factory=list)


def check_citations(text: str, sources: list[Source]) -> Checked:
    """Keep markers that name a given source, drop (and report) the rest, flag uncited sentences,
    and attach to each citation the source sentences that best support the citing sentences.

    Whatever the text (nested, glued or unbalanced brackets, numbers of any length), every
    marker left in the checked text names a source: dropping ``[0]`` from ``[[0]1]`` makes a new
    marker ``[1]``, so the pass repeats until the text no longer changes."""
    by_marker = {str(s.marker): s for s in sources}
    invalid: list[str] = []
    claims: dict[str, list[str]] = {}

    def keep_valid(match: re.Match[str]) -> str:
        # compared as strings: int() of a 5,000-digit "number" raises in Python 3.11+
        numbers = [n.strip().lstrip("0") or "0" for n in re.split(r"[,;]", match.group(1))]
        invalid.extend(n for n in numbers if n not in by_marker and n not in invalid)
        return "".join(f"[{n}]" for n in dict.fromkeys(n for n in numbers if n in by_marker))

    cleaned = text
    for _ in range(len(text) + 1):  # each pass that changes the text removes a bracket pair
        tidied = _tidy(_MARKER.sub(keep_valid, cleaned))
        if tidied == cleaned:
            break
        cleaned = tidied
    uncited: list[str] = []
    for start, end in sentence_spans(cleaned):
        sentence = cleaned[start:end]
        markers = re.findall(r"\[(\d+)\]", sentence)
        bare = _MARKER.sub("", sentence).strip()
        if not markers:
            if bare and not is_refusal(bare):
                uncited.append(bare)
            continue
        for n in markers:
            claims.setdefault(n, []).append(bare)
    citations = [
        Citation(
            marker=by_marker[n].marker,
            paper_id=by_marker[n].paper_id,
            title=by_marker[n].title,
            supporting=supporting_sentences(by_marker[n].text, claims[n]),
        )
        for n in sorted(claims, key=int)
    ]
    return Checked(cleaned, citations, invalid, uncited)


def _tidy(text: str) -> str:
    """Markers after the full stop moved before it ("claim. [1] Next" -> "claim [1]. Next": a
    marker belongs to the sentence before it), and the spaces a removed marker leaves folded."""
    text = _TRAILING_MARKERS.sub(r" \2\1", text)
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def supporting_sentences(source_text: str, claims: list[str], most: int = 2) -> list[str]:
    """The sentences of ``source_text`` sharing the most (stemmed) words with the claims."""
    sentences = [source_text[s:e] for s, e in sentence_spans(source_text)]
    if not sentences:
        return []
    wanted = set().union(*(set(t) for t in words(claims))) if claims else set()
    tokenized = words(sentences)
    scored = sorted(
        (
            (len(wanted & set(toks)) / (1 + len(set(toks))) ** 0.5, i)
            for i, toks in enumerate(tokenized)
        ),
        reverse=True,
    )
    best = [i for score, i in scored[:most] if score > 0] or [scored[0][1]]
    return [sentences[i] for i in sorted(best)]

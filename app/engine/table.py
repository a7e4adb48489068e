"""Evidence tables: the same short questions (columns) asked of many papers (rows), each cell the
span of that paper's own abstract that answers, the sentence it came from, or "not stated".

Offline, the answer selector (`app.providers.selector`) scores every sentence of one abstract
for one column, the paper alone: the best sentence is the cell's quote when the selector finds it
likely enough to state what is asked, and the clause of it that holds the asked words (or the
asked kind of answer: a number, a name) is the cell's text. With a chat model, the model fills a
row's cells from that abstract, and a quote it gives that the abstract does not hold makes the
cell "not stated" and flagged. Either way a cell quotes only its own paper.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from app.providers.base import ChatProvider
from app.providers.prompts import load_prompt
from app.providers.selector import (
    FULL,
    Selector,
    Sentence,
    cheap_features,
    full_features,
    shipped,
)
from app.query import question as q
from core.models import Source, TableCell, TableRow
from core.text import sentence_spans
from core.tokens import words
from ingest.embed import Embedder

NOT_STATED = "not stated"
STATED_AT = 0.25
"""The selector's chance at which a column's best sentence is taken to state it (below it the cell
is "not stated"): chosen by cross-validation over the training tables' batches (three, then nine)
(`data/train/tables.jsonl`), docs/tables.md."""
MIN_WORDS = 3  # a shorter "sentence" (a heading, a stray fragment) is never a cell's quote

# A column the rows' abstracts often answer, suggested when their words show up in a third of
# the rows (and the user has not asked it already).
SUGGESTIONS: dict[str, re.Pattern[str]] = {
    "dataset": re.compile(r"\b(datasets?|benchmarks?|corpus|corpora)\b", re.I),
    "main result": re.compile(r"\b(outperform\w*|improv\w*|state-of-the-art|achiev\w*)\b", re.I),
    "baseline beaten": re.compile(r"\b(outperform\w*|baselines?|compared (?:to|with))\b", re.I),
    "evaluation metric": re.compile(r"\b(accuracy|F1|BLEU|AUC|error rate|mAP|FID|regret)\b"),
    "speed-up": re.compile(r"\b(faster|speed-?ups?|\d+(?:\.\d+)?\s?x\b|latency)\b", re.I),
    "model size": re.compile(r"\b(parameters|\d+(?:\.\d+)?\s?[MB]\b)", re.I),
    "theoretical guarantee": re.compile(r"\b(bounds?|converge\w*|regret|guarantee\w*)\b", re.I),
    "limitation addressed": re.compile(r"\b(however|limitations?|suffer\w*|fail\w*)\b", re.I),
    "code available": re.compile(r"\b(code|github|open-?source\w*)\b", re.I),
    "sample size": re.compile(r"\b(participants|patients|subjects|samples)\b", re.I),
}

_QUESTION_START = re.compile(
    r"^(what|which|who|whom|whose|how|why|when|where|does|do|did|is|are|was|were|can|could|"
    r"has|have|had)\b",
    re.I,
)
_CLAUSE_BREAK = re.compile(
    r"(?<=;)\s+|(?<=,)\s+(?=(?:but|while|whereas|achieving|yielding|"
    r"resulting|leading|reaching|outperforming|improving|reducing)\b)|\s+(?=(?:while|whereas)\b)"
    r"|\s+—\s+|\s+--\s+"
)


def column_question(column: str) -> str:
    """A column as the question the selector reads: "dataset" -> "What is the dataset?"; a
    column written as a question stays as it is."""
    text = column.strip().rstrip("?").strip()
    if _QUESTION_START.match(text):
        return f"{text}?"
    plural = text.endswith("s") and not text.endswith(("ss", "us", "is"))
    return f"What {'are' if plural else 'is'} the {text}?"


def suggest(columns: Sequence[str], abstracts: Sequence[str], k: int = 4) -> list[str]:
    """Columns the papers' abstracts often answer, most often first, leaving out the columns
    already asked."""
    asked = {c.casefold() for c in columns}
    share = {
        name: sum(bool(cue.search(text)) for text in abstracts) / max(1, len(abstracts))
        for name, cue in SUGGESTIONS.items()
        if name not in asked
    }
    return [name for name in sorted(share, key=lambda n: -share[n]) if share[name] >= 1 / 3][:k]


def row_of(whole: Source, relevance: float | None = None) -> TableRow:
    """A paper, as a source holding its whole abstract (`Retriever.whole`), as a table row: the
    abstract as displayed is the text quotes are cut from."""
    linked = whole.model_dump(include=set(TableRow.model_fields) - {"abstract", "relevance"})
    return TableRow(**linked, abstract=whole.text, relevance=relevance)


@dataclass(frozen=True)
class Asked:
    """A column read once for every row: its question, words, vector and the answer's kind."""

    column: str
    question: str
    words: tuple[str, ...]
    vector: np.ndarray
    kinds: list[q.Wanted]
    detail: q.Detail | None


@dataclass(frozen=True)
class Read:
    """One abstract read for every column: its sentences' spans and vectors, and per column the
    sentences' features."""

    spans: list[tuple[int, int]]
    vectors: np.ndarray  # a row per sentence
    features: list[np.ndarray]  # per column, a row per sentence


@dataclass(frozen=True)
class Scored:
    """One column's sentences of one abstract, scored by the selector."""

    spans: list[tuple[int, int]]
    chance: np.ndarray  # per sentence: the chance that it states what the column asks


class CellFiller:
    """Fills rows offline: each column's best sentence of each abstract, by the selector."""

    def __init__(self, embedder: Embedder, selector: Selector | None = None) -> None:
        self.embedder = embedder
        self._given = selector

    @cached_property
    def selector(self) -> Selector:
        """The selector given, else the shipped one (loaded on first use)."""
        return self._given or shipped()

    def read(self, columns: Sequence[str]) -> list[Asked]:
        questions = [column_question(c) for c in columns]
        vectors = np.asarray([self.embedder.embed_query(t) for t in questions], dtype=np.float32)
        return [
            Asked(c, text, tuple(words([text])[0]), vec, q.wanted(text), q.asked_detail(text))
            for c, text, vec in zip(columns, questions, vectors, strict=True)
        ]

    def score(self, row: TableRow, asked: Sequence[Asked]) -> list[Scored]:
        """For each column, the selector's chance for every sentence of the row's abstract."""
        read = self.features(row, asked)
        stage, model = self.selector.column, self.embedder.spec.name
        return [
            Scored(read.spans, stage.probability(x, column.vector, read.vectors, model))
            if read.spans
            else Scored([], np.zeros(0))
            for column, x in zip(asked, read.features, strict=True)
        ]

    def features(self, row: TableRow, asked: Sequence[Asked]) -> Read:
        """The abstract's sentences (spans and vectors) and, for each column, their features
        (`FULL`): what the selector's column stage scores, and what it is trained on."""
        text = row.abstract
        spans = [(s, e) for s, e in sentence_spans(text) if len(text[s:e].split()) >= MIN_WORDS]
        if not spans:
            return Read([], np.zeros((0, 0), np.float32), [np.zeros((0, len(FULL)))] * len(asked))
        sentences = [text[s:e] for s, e in spans]
        vectors = self.embedder.embed_sentences(sentences)
        bag = set(words([f"{row.title} {text}"])[0])
        out = []
        for column in asked:
            cosine = vectors @ column.vector
            lexical = sum(w in bag for w in column.words) / max(1, len(column.words))
            cands = [
                Sentence(s, 0, i, len(spans), float(cosine.max()), lexical, False)
                for i, s in enumerate(sentences)
            ]
            cheap = cheap_features(column.question, column.words, cands)
            out.append(full_features(cheap, cosine, cands))
        return Read(spans, vectors, out)

    def fill(self, row: TableRow, asked: Sequence[Asked]) -> list[TableCell]:
        """The row's cells, in column order."""
        scored = self.score(row, asked)
        return [self._cell(row, c, s) for c, s in zip(asked, scored, strict=True)]

    def _cell(self, row: TableRow, column: Asked, scored: Scored) -> TableCell:
        if not scored.spans:
            return not_stated(column.column, 0.0)
        best = int(np.argmax(scored.chance))
        chance = float(scored.chance[best])
        start, end = scored.spans[best]
        quote = row.abstract[start:end]
        sentences = [row.abstract[s:e] for s, e in scored.spans]
        missing = column.detail is not None and not q.states(
            column.detail, sentences, f"{column.question} {row.title}"
        )
        if chance < STATED_AT or missing:
            return not_stated(column.column, 1.0 - chance)
        return TableCell(
            column=column.column,
            text=span_of(quote, column),
            quote=quote,
            stated=True,
            confidence=round(chance, 4),
            start=start,
            end=end,
        )


def not_stated(column: str, confidence: float, flagged: bool = False) -> TableCell:
    """The cell of a column the abstract does not answer; ``confidence`` that it does not."""
    return TableCell(
        column=column,
        text=NOT_STATED,
        quote="",
        stated=False,
        confidence=round(min(1.0, max(0.0, confidence)), 4),
        flagged=flagged,
    )


def clauses(sentence: str) -> list[str]:
    """The sentence cut at its clause boundaries (semicolons, a comma before "but", "while",
    "achieving", ..., dashes): the spans a cell's text is chosen from."""
    parts = [p.strip(" ,;:") for p in _CLAUSE_BREAK.split(sentence)]
    return [p for p in parts if len(p.split()) >= 2] or [sentence]


def span_of(sentence: str, column: Asked) -> str:
    """The shortest part of ``sentence`` that answers: the clause holding the most of what the
    column asks (its words, a number for "how much", a name for "which"), the whole sentence
    when no clause holds more than another."""
    parts = clauses(sentence)
    if len(parts) == 1:
        return sentence.strip()
    asked = set(column.words)

    def weight(part: str) -> float:
        held = len(asked & set(words([part])[0])) / max(1, len(asked))
        return held + q.fit(column.kinds, column.question, part)

    weights = [weight(p) for p in parts]
    best = max(range(len(parts)), key=lambda i: weights[i])
    if sorted(weights)[-2] == weights[best]:
        return sentence.strip()
    return parts[best]


# --- a chat model fills the cells ----------------------------------------------------------------


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w%.]+", " ", text.casefold()).split())


def locate(quote: str, abstract: str) -> tuple[int, int] | None:
    """The sentence of ``abstract`` that holds ``quote`` (case, spacing and punctuation aside),
    as its span; None when no sentence holds it."""
    wanted = _normal(quote)
    if len(wanted) < 4:
        return None
    for start, end in sentence_spans(abstract):
        if wanted in _normal(abstract[start:end]):
            return start, end
    return None


def model_cells(
    chat: ChatProvider, row: TableRow, columns: Sequence[str], scored: Sequence[Scored]
) -> list[TableCell]:
    """A row's cells written by a chat model from the abstract alone. A stated cell keeps the
    model's answer, with the abstract's sentence that holds its quote; a quote the abstract does
    not hold makes the cell "not stated" and flagged. The confidence is the selector's chance
    for the quoted sentence."""
    listed = "\n".join(f"{i}. {c}" for i, c in enumerate(columns, start=1))
    system = load_prompt("table.system").format(not_stated=NOT_STATED)
    user = load_prompt("table.user").format(title=row.title, abstract=row.abstract, columns=listed)
    raw = chat.complete([("system", system), ("user", user)], json=True).text()
    given = _parse_cells(raw, columns)
    cells = []
    for column, score in zip(columns, scored, strict=True):
        answer, quote = given.get(column, ("", ""))
        if not answer or answer.casefold().strip(" .") == NOT_STATED or not quote:
            cells.append(not_stated(column, 0.5))
            continue
        found = locate(quote, row.abstract)
        if found is None:
            cells.append(not_stated(column, 0.5, flagged=True))
            continue
        start, end = found
        chance = next(
            (float(c) for (s, _), c in zip(score.spans, score.chance, strict=True) if s == start),
            0.5,
        )
        cells.append(
            TableCell(
                column=column,
                text=" ".join(answer.split())[:500],
                quote=row.abstract[start:end],
                stated=True,
                confidence=round(chance, 4),
                start=start,
                end=end,
            )
        )
    return cells


def _parse_cells(raw: str, columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """The model's reply read leniently: {"cells": [{"column", "answer", "quote"}]} by column
    name or number; anything unreadable counts as unanswered."""
    try:
        data = json.loads(raw[raw.find("{") : raw.rfind("}") + 1])
    except ValueError:
        return {}
    items = data.get("cells", []) if isinstance(data, dict) else []
    out: dict[str, tuple[str, str]] = {}
    for n, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        name = str(item.get("column", ""))
        column = next((c for c in columns if c.casefold() == name.casefold().strip()), None)
        if column is None and n < len(columns):
            column = columns[n]
        if column is not None and column not in out:
            out[column] = (str(item.get("answer") or ""), str(item.get("quote") or ""))
    return out


def fill_rows(
    rows: Sequence[TableRow],
    columns: Sequence[str],
    filler: CellFiller,
    chat: ChatProvider | None,
    workers: int,
) -> Iterator[TableRow]:
    """The rows with their cells, in order, as each is filled: offline one after another (the
    embedding model uses every core), with a chat model ``workers`` rows at once."""
    asked = filler.read(columns)

    def offline(row: TableRow) -> TableRow:
        return row.model_copy(update={"cells": filler.fill(row, asked)})

    if chat is None:
        yield from map(offline, rows)
        return

    def written(row: TableRow) -> TableRow:
        cells = model_cells(chat, row, columns, filler.score(row, asked))
        return row.model_copy(update={"cells": cells})

    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        yield from pool.map(written, rows)
    finally:  # stopped early: the rows not started are dropped, not filled unseen
        pool.shutdown(wait=False, cancel_futures=True)

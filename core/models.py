"""Typed records every layer shares: papers and chunks, reports, filters, answers.

Citations refer to stable paper ids. Values that follow from others (a source's rank, the
filters in words, which sources are cited) are computed here, never stored beside them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    computed_field,
    field_validator,
)

from core.errors import InputError

Mode = Literal["hybrid", "dense", "bm25"]
"""How retrieval ranks: dense and BM25 fused, or one of them alone."""
MODES: tuple[str, ...] = get_args(Mode)


@dataclass(frozen=True)
class ModelSpec:
    """What the index records about the embedding model that built it."""

    name: str
    dim: int
    # The longest chunk (tiktoken tokens) that fits the model's input window with the title.
    chunk_tokens: int


def chunk_id(paper_id: str, index: int) -> str:
    """The id of a paper's ``index``-th chunk (0-based)."""
    return f"{paper_id}:{index}"


def paper_of(chunk_id: str) -> str:
    """The paper id a chunk id names."""
    return chunk_id.rsplit(":", 1)[0]


class Linked(BaseModel):
    """A paper's DOI and arXiv id, and the links they make."""

    doi: str | None = Field(default=None, description="The DOI, lower case, without a resolver.")
    arxiv_id: str | None = Field(default=None, description="The arXiv id, without a version.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doi_url(self) -> str | None:
        return f"https://doi.org/{self.doi}" if self.doi else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def arxiv_url(self) -> str | None:
        return f"https://arxiv.org/abs/{self.arxiv_id}" if self.arxiv_id else None


class Paper(Linked):
    """One abstract as read from the corpus; ``abstract`` keeps the source text (LaTeX included)."""

    paper_id: str
    title: str
    title_derived: bool = Field(
        default=False,
        description="True when the corpus gave no title and it was made from the text.",
    )
    abstract: str
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    url: str | None = None
    keywords: list[str] = Field(default_factory=list)
    decision: str | None = None
    source: str = Field(default="", description="file:line the record came from.")


class Chunk(BaseModel):
    """A piece of an abstract, the unit that is embedded and retrieved."""

    chunk_id: str
    paper_id: str
    index: int
    start: int = Field(description="Character offset of the chunk in the abstract.")
    end: int
    text: str = Field(description="The abstract's own text for the span (LaTeX kept).")
    plain: str = Field(description="The text as displayed and searched (LaTeX rendered).")
    embed_text: str = Field(description="What is embedded: title context plus normalised text.")
    content_hash: str


class Problem(BaseModel):
    """A record or file that was skipped (or read with a caveat), with where and why."""

    file: str
    line: int | None = None
    reason: str

    @field_validator("file", "reason")
    @classmethod
    def _writable(cls, text: str) -> str:
        """Bytes that were not UTF-8 (kept as surrogates while reading) shown as escapes
        ("\\xc7"): a report quotes a broken file's text, and must still be written as JSON."""
        try:
            raw = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate no undecodable byte made
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return raw.decode("utf-8", "backslashreplace")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.reason}"


class IngestReport(BaseModel):
    """What `abstract-qa ingest` did. The JSON form of this model is a stable interface."""

    files: int = Field(default=0, description="Files read.")
    papers: int = Field(default=0, description="Papers parsed from the input.")
    chunks: int = Field(default=0, description="Chunks the parsed papers make.")
    added: int = Field(default=0, description="Chunks new to the index.")
    updated: int = Field(default=0, description="Chunks whose text changed and were re-embedded.")
    unchanged: int = Field(default=0, description="Chunks already indexed with the same content.")
    removed: int = Field(
        default=0,
        description="Chunks deleted: stale chunks of changed papers, or the removed papers'.",
    )
    embedded: int = Field(
        default=0,
        description="Chunks embedded this run: new ones and those whose embedded text changed "
        "(a metadata-only update is not embedded again).",
    )
    formats: dict[str, str] = Field(
        default_factory=dict, description="How each file read was read: BibTeX, RIS, ..."
    )
    skipped: list[Problem] = Field(default_factory=list, description="Records or files not read.")
    merged: list[Problem] = Field(
        default_factory=list,
        description="Records of a paper read before or already indexed (the same DOI, arXiv id "
        "or title), merged into it.",
    )
    warnings: list[Problem] = Field(
        default_factory=list,
        description="Records read with a caveat (e.g. a year that is no number).",
    )
    seconds: float = 0.0
    timings: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds per step: read, diff, chunk, model (loading the embedding model; "
        "only when this ingest had to: a running server has it), embed, index, bm25.",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def without_abstract(self) -> int:
        """Records skipped for having no abstract (common in BibTeX); each is in ``skipped``."""
        return sum(p.reason.startswith("no abstract") for p in self.skipped)


class IndexStats(BaseModel):
    """What `abstract-qa stats` prints."""

    papers: int
    chunks: int
    venues: dict[str, int]
    years: dict[str, int]
    embedding_model: str | None
    embedding_dim: int | None
    data_dir: Path
    chroma: str = Field(description="`embedded` or the server's host:port.")


class Source(Linked):
    """A retrieved paper with the passage(s) that matched; numbered as the answer cites it."""

    marker: int = Field(description="The number the answer cites this source by: [1], [2], ...")
    paper_id: str
    title: str
    title_derived: bool = False
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    decision: str | None = None
    url: str | None = None
    text: str = Field(description="The retrieved passage, LaTeX normalised to plain text.")
    chunk_ids: list[str] = Field(default_factory=list)
    score: float = Field(description="Cosine similarity of the best passage to the question.")
    lexical: float = Field(
        default=0.0, description="Share of the question's word weight (idf) the passage contains."
    )
    relevance: float = Field(
        default=0.0,
        description="score + 0.5 x lexical + 0.5 x the question's similarity to the corpus mean; "
        "an answer needs a source at the answer's min_relevance or above.",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rank(self) -> int:
        """1-based position after fusion: the marker."""
        return self.marker


class Citation(BaseModel):
    """One citation marker in the answer, resolved to a paper."""

    marker: int
    paper_id: str
    title: str
    supporting: list[str] = Field(
        default_factory=list, description="The source's sentences that support the claim."
    )


class Usage(BaseModel):
    """Tokens one model call (or one answer's calls, summed) used."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )

    @staticmethod
    def total(*parts: Usage | None) -> Usage | None:
        """The sum of the reported parts; None when no part was reported."""
        reported = [p for p in parts if p is not None]
        return sum(reported[1:], reported[0]) if reported else None


class Counts(BaseModel):
    """A counting or trend question answered from the metadata of the papers that match."""

    topic: str = Field(description="What was counted, as searched.")
    rule: str = Field(description="How a paper was judged to match: the cut-off, in words.")
    min_similarity: float = Field(description="Cosine similarity at which a paper matches.")
    papers: int = Field(description="Matching papers (after the filters).")
    by_year: dict[str, int] = Field(default_factory=dict)
    by_venue: dict[str, int] = Field(default_factory=dict, description="Most papers first.")
    by_decision: dict[str, int] = Field(default_factory=dict)


class Filters(BaseModel):
    """Which papers may be retrieved. Empty lists and None mean no restriction.

    The one record every front builds (the CLI, the app, the HTTP API's ``filters``, the MCP
    tools' ``filters``, the LangChain adapters) and the store reads; a field added here is a new
    filter kind everywhere. Strict as a request body is: a boolean is no year, a number no
    venue (58.0 is still the year 58, as JSON Schema reads it)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    year_from: int | None = Field(default=None, description="Earliest year, inclusive.")
    year_to: int | None = Field(default=None, description="Latest year, inclusive.")
    venues: list[str] = Field(default_factory=list, description="Venues, case-insensitive.")
    decisions: list[str] = Field(default_factory=list, description="Decisions, e.g. Oral.")
    authors: list[str] = Field(
        default_factory=list,
        description="Authors, as people write them: case, accents and initials do not matter "
        '("Schölkopf", "Scholkopf", "B. Schölkopf"). A paper passes with any of them.',
    )
    from_question: list[str] = Field(
        default_factory=list,
        description="Which of the filters were read from the question (set in answers; "
        "ignored when given).",
    )

    @field_validator("year_from", "year_to", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        return int(value) if isinstance(value, float) and value.is_integer() else value

    @property
    def active(self) -> bool:
        return (
            self.year_from is not None
            or self.year_to is not None
            or any(getattr(self, name) for name in _LISTS)
        )

    @property
    def read_kinds(self) -> set[str]:
        """The kinds (`FILTER_KINDS`: "year", "venues", ...) read from the question."""
        return {f.split("_")[0] if f.startswith("year") else f for f in self.from_question}

    def describe(self) -> str:
        parts = []
        if self.venues:
            parts.append("venue " + " or ".join(self.venues))
        if self.year_from is not None and self.year_from == self.year_to:
            parts.append(f"year {self.year_from}")
        elif self.year_from is not None and self.year_to is not None:
            parts.append(f"years {self.year_from} to {self.year_to}")
        elif self.year_from is not None:
            parts.append(f"years from {self.year_from}")
        elif self.year_to is not None:
            parts.append(f"years up to {self.year_to}")
        for name in _LISTS:
            if name != "venues" and (values := getattr(self, name)):
                parts.append(f"{_LISTS[name]} " + " or ".join(values))
        return ", ".join(parts) or "none"

    @classmethod
    def given(
        cls,
        year_from: int | None = None,
        year_to: int | None = None,
        venue: str | list[str] | None = None,
        decision: str | list[str] | None = None,
        authors: str | list[str] | None = None,
    ) -> Filters:
        """The record from the keywords of `ask()`: a name or a list for each of the others."""

        def listed(value: str | list[str] | None) -> list[str]:
            return [value] if isinstance(value, str) else list(value or [])

        return cls(
            year_from=year_from,
            year_to=year_to,
            venues=listed(venue),
            decisions=listed(decision),
            authors=listed(authors),
        )

    def merged_over(self, parsed: Filters) -> Filters:
        """These (explicit) filters, with the question's filling only what was not given."""
        merged: dict[str, Any] = {}
        used: list[str] = []
        years_given = self.year_from is not None or self.year_to is not None
        for name in self.model_fields:
            if name == "from_question":
                continue
            mine, theirs = getattr(self, name), getattr(parsed, name)
            explicit = years_given if name.startswith("year") else bool(mine)
            merged[name] = mine if explicit else theirs
            if not explicit and theirs not in (None, []):
                used.append(name)
        return Filters(**merged, from_question=used)

    def without(self, names: Iterable[str]) -> Filters:
        """These filters less the named kinds (`FILTER_KINDS`: "year", "venues", ...)."""
        drop = set(names)
        update: dict[str, Any] = {}
        if "year" in drop:
            update |= {"year_from": None, "year_to": None}
        update |= {name: [] for name in _LISTS if name in drop}
        kept = [f for f in self.from_question if f not in drop and f.split("_")[0] not in drop]
        return self.model_copy(update={**update, "from_question": kept})


FILTER_KEYWORDS = ("year_from", "year_to", "venue", "decision", "authors")
"""The keywords of `Filters.given`: the filters as `ask()` takes them, a name or a list each."""
FilterKind = Literal["year", "venues", "decisions", "authors"]
"""A filter kind, as ``ignore`` names it: "year" is the range, the others are `Filters` fields."""
FILTER_KINDS: dict[FilterKind, str] = {
    "year": "year",
    "venues": "venue",
    "decisions": "decision",
    "authors": "author",
}
"""Each kind's word in `Filters.describe` and in the app."""
_LISTS = {name: word for name, word in FILTER_KINDS.items() if name != "year"}


class Answer(BaseModel):
    """What `ask()` returns; the CLI's `ask --json` prints this model."""

    question: str
    standalone_question: str = Field(description="The question as retrieved, follow-ups resolved.")
    answer: str
    abstained: bool
    citations: list[Citation] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    filters: Filters = Field(default_factory=lambda: Filters())
    min_relevance: float | None = Field(
        default=None, description="The relevance a source needed (fitted to the index size)."
    )
    invalid_citations: list[str] = Field(
        default_factory=list, description="Markers the model produced that name no source; removed."
    )
    uncited_sentences: list[str] = Field(default_factory=list)
    provider: str
    model: str | None = None
    usage: Usage | None = None
    counts: Counts | None = Field(
        default=None, description="For counting and trend questions: the counts behind the answer."
    )
    timings: dict[str, float] = Field(default_factory=dict)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def filters_applied(self) -> str:
        """The filters in words ("venue ICLR, year 2024"), or "none"."""
        return self.filters.describe()

    @property
    def cited_sources(self) -> list[Source]:
        """The sources the answer cites, in marker order."""
        cited = {c.marker for c in self.citations}
        return [s for s in self.sources if s.marker in cited]

    @property
    def cited_paper_ids(self) -> list[str]:
        """The ids of the papers the answer cites, each once, in marker order."""
        return list(dict.fromkeys(s.paper_id for s in self.cited_sources))


Rating = Literal["up", "down"]
"""A user's verdict on an answer: thumbs up or thumbs down."""


class Feedback(BaseModel):
    """What a user says of one answer: the rating, an optional comment, and the answer as it
    was given (the question, its text, the paper ids it cites, how it was asked). `of` builds
    it from an `Answer`; the HTTP API and the MCP tool take it as it is."""

    model_config = ConfigDict(extra="forbid", strict=True)

    rating: Rating
    comment: str | None = Field(default=None, max_length=4000, description="Why, in words.")
    question: str = Field(min_length=1, max_length=10_000, description="The question asked.")
    standalone_question: str | None = Field(
        default=None,
        max_length=10_000,
        description="The question with a follow-up resolved (an answer's `standalone_question`);"
        " what an evaluation asks again. None: the question is standalone.",
    )
    answer: str = Field(default="", max_length=100_000, description="The answer text rated.")
    cited: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        max_length=100,
        description="The paper ids the answer cites (its `cited_sources`, in marker order).",
    )
    abstained: bool = Field(default=False, description="The answer said the abstracts do not tell.")
    filters: Filters = Field(default_factory=Filters, description="The answer's `filters`.")
    provider: str | None = Field(default=None, max_length=200, description="Who wrote it.")
    model: str | None = Field(default=None, max_length=200, description="Its model, if any.")

    @classmethod
    def of(cls, answer: Answer, rating: Rating, comment: str | None = None) -> Feedback:
        """A rating of ``answer``, with what the store keeps of it."""
        return cls(
            rating=rating,
            comment=(comment or "").strip() or None,
            question=answer.question,
            standalone_question=answer.standalone_question,
            answer=answer.answer,
            cited=answer.cited_paper_ids,
            abstained=answer.abstained,
            filters=answer.filters,
            provider=answer.provider,
            model=answer.model,
        )


class FeedbackRecord(Feedback):
    """A stored rating: its number, when it was given and changed, and the index it rated."""

    model_config = ConfigDict(extra="forbid", strict=False)

    id: int = Field(description="The rating's number in the feedback store.")
    created: datetime
    updated: datetime
    index: str = Field(
        description="The index's fingerprint (the generation of its last write) when rated."
    )


class WeekCount(BaseModel):
    week: str = Field(description="ISO week, e.g. 2026-W49.")
    up: int
    down: int


class FeedbackStats(BaseModel):
    """What `abstract-qa feedback stats` prints."""

    total: int
    up: int
    down: int
    commented: int = Field(description="Ratings with a comment.")
    weeks: list[WeekCount] = Field(description="Ratings per ISO week, oldest first.")


class Origin(BaseModel):
    """Where a question from feedback came from: the rating, its comment and the answer rated."""

    model_config = ConfigDict(extra="forbid")

    feedback_id: int
    rating: Rating
    comment: str | None = None
    answer: str
    cited: list[str] = Field(default_factory=list)
    rated: datetime


class EvalQuestion(BaseModel):
    """One line of a question file (JSON Lines; see data/eval/README.md)."""

    model_config = {"extra": "forbid"}

    id: str
    question: str = Field(min_length=1)
    gold: list[str] = Field(default_factory=list, description="Paper ids that answer it.")
    facts: list[list[str]] = Field(
        default_factory=list,
        description="Facts the answer must hold; each lists accepted variants.",
    )
    answerable: bool = True
    type: str = "factual"
    follows: str | None = Field(default=None, description="Asked after this question's answer.")
    filters: Filters | None = Field(default=None, description="Asked with these filters.")
    review: bool = Field(
        default=False,
        description="Not scored yet: a thumbs-down waiting for someone to write its gold papers "
        "(then set it to false). Answered and listed for review.",
    )
    origin: Origin | None = Field(default=None, description="Set for questions from feedback.")


class Evidence(BaseModel):
    """Where a training question's fact is stated: a sentence of a gold paper's abstract."""

    model_config = {"extra": "forbid"}

    paper: str
    sentence: str = Field(
        min_length=1,
        description="As the answerer cuts the abstract (for a listing's paper that only its "
        "title shows fits, the title).",
    )


class TrainQuestion(EvalQuestion):
    """One line of an annotated training question file (data/train/README.md): a question of
    the eval format, and for each fact the sentence that states it."""

    evidence: list[Evidence] = Field(
        default_factory=list, description="A sentence for each fact (for a listing, each paper)."
    )
    asked: str | None = Field(default=None, description="The detail a not-stated question asks.")
    batch: str | None = Field(default=None, description="The annotator's packet it came from.")
    search_terms: list[str] = Field(
        default_factory=list,
        description="For an exhaustive listing: the words its annotator searched the corpus for.",
    )


MAX_COLUMN_CHARS = 200
MAX_COLUMNS = 12
MAX_TABLE_ROWS = 200


def _worded(column: str) -> str:
    if not re.search(r"\w", column):  # as the schema's pattern reads (Python's \w)
        raise ValueError("a column needs a letter or digit: write the short question it asks")
    return column


Column = Annotated[
    str,
    Field(min_length=1, max_length=MAX_COLUMN_CHARS, json_schema_extra={"pattern": r"\w"}),
    AfterValidator(_worded),
]
"""An evidence table's column: a short question ("dataset"), holding a letter or digit."""


class TableRequest(BaseModel):
    """What an evidence table is asked for: its rows (a topic searched, or paper ids) and its
    columns. The HTTP `POST /table` body and the MCP `table` tool's arguments. A blank or
    repeated column, or neither a topic nor ids, is refused by the service (a 400)."""

    # strict as `AskRequest` is: a number is not a topic, a boolean not a row count
    model_config = ConfigDict(extra="forbid", strict=True)

    topic: str | None = Field(
        default=None,
        max_length=2000,
        description="A question or keywords: its most relevant papers are the rows.",
        examples=["contrastive learning for speech"],
    )
    papers: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(
        default_factory=list,
        max_length=MAX_TABLE_ROWS,
        description="Paper ids to use as the rows, in this order (instead of a topic's papers).",
    )
    columns: list[Column] = Field(
        min_length=1,
        max_length=MAX_COLUMNS,
        description="Short questions asked of every paper, one column each.",
        examples=[["dataset", "main result"]],
    )
    rows: int = Field(
        default=10, ge=1, le=MAX_TABLE_ROWS, description="How many papers a topic gives."
    )
    filters: Filters = Field(default_factory=Filters, description="Limit a topic's papers.")

    @field_validator("rows", mode="before")
    @classmethod
    def _whole(cls, value: object) -> object:
        """10.0 as the integer 10, as JSON Schema reads it (a strict int takes no float)."""
        return int(value) if isinstance(value, float) and value.is_integer() else value

    @classmethod
    def read(cls, **fields: Any) -> TableRequest:
        """The request from its fields, as the Python, CLI and app fronts take them: the first
        field out of bounds is an InputError naming it ("columns.1: a column needs ...")."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "input"
            raise InputError(f"{where}: {first['msg'].removeprefix('Value error, ')}") from None


class TableCell(BaseModel):
    """One paper's answer to one column: the shortest span that answers, the sentence of the
    abstract it came from, or "not stated"."""

    column: str
    text: str = Field(description="The answering span; 'not stated' when the abstract does not.")
    quote: str = Field(description="The abstract's sentence the span came from ('' if none).")
    stated: bool = Field(description="False when the abstract does not give what the column asks.")
    confidence: float = Field(ge=0, le=1, description="How likely the quote states what is asked.")
    start: int | None = Field(
        default=None, description="Where the quote starts in the row's `abstract` text."
    )
    end: int | None = None
    flagged: bool = Field(
        default=False,
        description="A model's quote that does not occur in the abstract (made 'not stated').",
    )


class TableRow(Linked):
    """A paper of the table, with its cells in column order."""

    paper_id: str
    title: str
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    decision: str | None = None
    url: str | None = None
    abstract: str = Field(description="The abstract as plain text; quotes are cut from it.")
    relevance: float | None = Field(
        default=None, description="The paper's relevance to the topic (None for ids given)."
    )
    cells: list[TableCell] = Field(default_factory=list)


class Table(BaseModel):
    """An evidence table: the same questions asked of many papers (`table()`, `POST /table`)."""

    topic: str | None = None
    columns: list[str]
    rows: list[TableRow] = Field(default_factory=list)
    suggested_columns: list[str] = Field(
        default_factory=list, description="Columns this topic's papers often answer; not filled."
    )
    filters: Filters = Field(default_factory=lambda: Filters())
    provider: str = "extractive"
    model: str | None = None
    complete: bool = Field(default=True, description="False when stopped before every row.")
    timings: dict[str, float] = Field(default_factory=dict)

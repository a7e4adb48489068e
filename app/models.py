"""Typed records shared by ingest and the app. Citations refer to stable paper ids."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class Paper(BaseModel):
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
    removed: int = Field(default=0, description="Stale chunks of changed papers deleted.")
    embedded: int = Field(
        default=0,
        description="Chunks embedded this run: new ones and those whose embedded text changed "
        "(a metadata-only update is not embedded again).",
    )
    skipped: list[Problem] = Field(default_factory=list, description="Records or files not read.")
    warnings: list[Problem] = Field(
        default_factory=list,
        description="Records read with a caveat (e.g. a year that is no number).",
    )
    seconds: float = 0.0
    timings: dict[str, float] = Field(default_factory=dict, description="Seconds per step.")


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


class Source(BaseModel):
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
    rank: int = Field(description="1-based position after fusion.")
    relevance: float = Field(
        default=0.0,
        description="score + 0.5 x lexical + 0.5 x the question's similarity to the corpus mean; "
        "an answer needs a source at the answer's min_relevance or above.",
    )
    cited: bool = False


class Citation(BaseModel):
    """One citation marker in the answer, resolved to a paper."""

    marker: int
    paper_id: str
    title: str
    supporting: list[str] = Field(
        default_factory=list, description="The source's sentences that support the claim."
    )


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Counts(BaseModel):
    """A counting or trend question answered from the metadata of the papers that match."""

    topic: str = Field(description="What was counted, as searched.")
    rule: str = Field(description="How a paper was judged to match: the cut-off, in words.")
    min_similarity: float = Field(description="Cosine similarity at which a paper matches.")
    papers: int = Field(description="Matching papers (after the filters).")
    by_year: dict[str, int] = Field(default_factory=dict)
    by_venue: dict[str, int] = Field(default_factory=dict, description="Most papers first.")
    by_decision: dict[str, int] = Field(default_factory=dict)


class Answer(BaseModel):
    """What `ask()` returns; the CLI's `ask --json` prints this model."""

    question: str
    standalone_question: str = Field(description="The question as retrieved, follow-ups resolved.")
    answer: str
    abstained: bool
    citations: list[Citation] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    filters: dict[str, object] = Field(default_factory=dict)
    filters_applied: str = "none"
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

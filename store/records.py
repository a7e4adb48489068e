"""The stored-chunk record and its one conversion to and from Chroma's shapes.

Above the store nothing reads Chroma's metadata keys: a chunk comes back as a `StoredChunk`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from core.models import Chunk, Paper, paper_of
from core.text import fingerprint, needs_rendering, plain_text


def paper_hash(paper: Paper, chunking: str) -> str:
    """Changes when anything that shapes a paper's chunks changes: its record or the chunking."""
    return fingerprint(paper.model_dump_json(exclude={"source"}), chunking)


def search_text(title: str, title_derived: bool, text: str) -> str:
    """What lexical search and lexical coverage read: the title (unless it was made from the
    text) and the text."""
    return f"{'' if title_derived else title}. {text}"


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as the index holds it: its text, where it sits in the abstract, its paper's
    metadata, and the hashes a re-ingest compares. ``text`` is empty when read without it."""

    chunk_id: str
    paper_id: str
    index: int = 0
    start: int = 0
    end: int = 0
    text: str = ""
    title: str = ""
    title_derived: bool = False
    authors: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    year: int | None = None
    venue: str | None = None
    decision: str | None = None
    url: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    source: str = ""
    content_hash: str = ""
    meta_hash: str = ""
    paper_hash: str = ""  # on a paper's first chunk only
    n_chunks: int = 0  # on a paper's first chunk only
    rendered: str | None = None  # the text with LaTeX rendered at ingest (None: it had none)
    rendered_title: str | None = None
    identity: tuple[str, ...] = ()  # on a paper's first chunk only: see `IDENTITY_KINDS`

    @classmethod
    def of(
        cls,
        paper: Paper,
        chunk: Chunk,
        n_chunks: int,
        chunking: str,
        identity: Sequence[str] = (),
    ) -> StoredChunk:
        """The record ingest writes for ``chunk`` of ``paper``; ``identity`` is the paper's keys
        (``doi:...``, ``arxiv:...``, ``title:...``, as `ingest.identity` makes them)."""
        record = cls(
            **chunk.model_dump(include={"chunk_id", "index", "start", "end", "text"}),
            **paper.model_dump(include=_PAPER_FIELDS),
            authors=tuple(paper.authors),
            keywords=tuple(paper.keywords),
            content_hash=chunk.content_hash,
            # on the first chunk: lets a re-ingest skip an unchanged paper without chunking it
            paper_hash=paper_hash(paper, chunking) if chunk.index == 0 else "",
            n_chunks=n_chunks if chunk.index == 0 else 0,
            # LaTeX rendering is slow (pylatexenc, ~20 ms an abstract): done once, not per query
            rendered=chunk.plain if needs_rendering(chunk.text) else None,
            rendered_title=plain_text(paper.title) if needs_rendering(paper.title) else None,
            identity=tuple(identity) if chunk.index == 0 else (),
        )
        meta = record._metadata()
        # where a paper was read from may change without the chunk being touched
        described = json.dumps({key: meta[key] for key in sorted(meta) if key != "source"})
        return replace(record, meta_hash=fingerprint(described))

    @cached_property
    def plain(self) -> str:
        """The text as displayed and searched (LaTeX rendered)."""
        return self.rendered if self.rendered is not None else plain_text(self.text)

    @cached_property
    def plain_title(self) -> str:
        if self.rendered_title is not None:
            return self.rendered_title
        return plain_text(self.title or self.paper_id)

    @property
    def search_text(self) -> str:
        return search_text(self.plain_title, self.title_derived, self.plain)

    # --- Chroma's shapes: the one place they are read and written ----------------------------
    def to_store(self) -> tuple[str, str, dict[str, Any]]:
        """Id, document and metadata as Chroma stores them. Chroma merges a write's metadata
        into what the chunk had, so every key this record lacks is sent as None (which deletes
        it): a venue or DOI dropped from a paper is dropped from the index."""
        meta = {**dict.fromkeys(_CLEARED), **self._metadata(), "meta_hash": self.meta_hash}
        return self.chunk_id, self.text, meta

    def _metadata(self) -> dict[str, Any]:
        # the values a record has (`to_store` adds None for the others)
        meta: dict[str, Any] = {
            "paper_id": self.paper_id,
            "chunk_index": self.index,
            "start": self.start,
            "end": self.end,
            "title": self.title,
            "title_derived": self.title_derived,
            "authors": json.dumps(list(self.authors), ensure_ascii=False),
            "keywords": json.dumps(list(self.keywords), ensure_ascii=False),
            "source": self.source,
            "content_hash": self.content_hash,
        }
        if self.rendered is not None:
            meta["plain"] = self.rendered
        if self.rendered_title is not None:
            meta["plain_title"] = self.rendered_title
        for key in ("year", "venue", "url", "decision", "doi", "arxiv_id"):
            if (value := getattr(self, key)) is not None:
                meta[key] = value
        # lower-case copies for Chroma's case-sensitive filters
        if self.venue:
            meta["venue_key"] = self.venue.casefold()
        if self.decision:
            meta["decision_key"] = self.decision.casefold()
        if self.index == 0:
            meta["paper_hash"] = self.paper_hash
            meta["n_chunks"] = self.n_chunks
            meta |= identity_metadata(self.identity)
        return meta

    @classmethod
    def from_store(
        cls, chunk_id: str, document: str | None, meta: dict[str, Any] | None
    ) -> StoredChunk:
        meta = {key: value for key, value in (meta or {}).items() if value is not None}
        year = meta.get("year")
        values: dict[str, Any] = {
            **{field: int(meta.get(key, 0)) for field, key in _INTS.items()},
            **{field: str(meta.get(key, "")) for field, key in _STRINGS.items()},
            **{field: _optional(meta.get(key)) for field, key in _OPTIONAL.items()},
        }
        return cls(
            chunk_id=chunk_id,
            paper_id=str(meta.get("paper_id", paper_of(chunk_id))),
            text=document or "",
            title_derived=bool(meta.get("title_derived", False)),
            authors=tuple(_json_list(meta.get("authors"))),
            keywords=tuple(_json_list(meta.get("keywords"))),
            year=year if isinstance(year, int) and not isinstance(year, bool) else None,
            identity=tuple(
                f"{kind}:{meta[key]}" for kind, key in IDENTITY_KINDS.items() if meta.get(key)
            ),
            **values,
        )


_PAPER_FIELDS = {
    "paper_id", "title", "title_derived", "year", "venue", "decision", "url", "doi", "arxiv_id",
    "source",
}  # fmt: skip
# record field -> metadata key, by type
_INTS = {"index": "chunk_index", "start": "start", "end": "end", "n_chunks": "n_chunks"}
_STRINGS = {k: k for k in ("title", "source", "content_hash", "meta_hash", "paper_hash")}
_OPTIONAL = {
    "venue": "venue", "decision": "decision", "url": "url", "doi": "doi", "arxiv_id": "arxiv_id",
    "rendered": "plain", "rendered_title": "plain_title",
}  # fmt: skip


IDENTITY_KINDS = {"doi": "key_doi", "arxiv": "key_arxiv", "title": "key_title"}
"""A paper's keys in every export of it (kind -> metadata key, on its first chunk): the DOI and
arXiv id in their canonical forms and the title's key (not when the title was made from the
text). A reference library's record is looked up by them (Chroma ``where``), not by a scan."""
IDENTITY_LAYOUT = "1"
"""Bump when the keys' forms change (`ingest.identity`): indexes are then labelled again."""
# every metadata key a record may lack: sent as None so that a write deletes a stale one
_CLEARED = (
    *("plain", "plain_title", "year", "venue", "url", "decision", "doi", "arxiv_id"),
    *("venue_key", "decision_key", "paper_hash", "n_chunks", *IDENTITY_KINDS.values()),
)


def identity_metadata(identity: Sequence[str]) -> dict[str, str]:
    """A first chunk's identity keys as metadata (``doi:10.1/x`` -> ``key_doi: 10.1/x``)."""
    kinds = dict(key.split(":", 1) for key in identity)
    return {key: kinds[kind] for kind, key in IDENTITY_KINDS.items() if kinds.get(kind)}


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def _json_list(raw: Any) -> list[str]:
    """A list Chroma holds as a JSON string (its metadata values are scalars)."""
    if not isinstance(raw, str) or not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def stitch(chunks: list[StoredChunk]) -> Paper | None:
    """A paper as its stored chunks (in order) hold it: the metadata of the first, the abstract
    put back together from the chunks' spans (they overlap)."""
    if not chunks:
        return None
    head, text, end = chunks[0], "", 0
    for chunk in chunks:
        if chunk.start >= end:
            text += (" " if text else "") + chunk.text
        elif chunk.end > end:
            text += chunk.text[end - chunk.start :]
        end = max(end, chunk.end)
    return Paper(
        paper_id=head.paper_id,
        title=head.title,
        title_derived=head.title_derived,
        abstract=text,
        authors=list(head.authors),
        keywords=list(head.keywords),
        year=head.year,
        venue=head.venue,
        decision=head.decision,
        url=head.url,
        doi=head.doi,
        arxiv_id=head.arxiv_id,
        source=head.source,
    )

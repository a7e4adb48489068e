"""The store: a Chroma collection of chunks (embedded or on a server) and the BM25 index beside it.

Chroma is the source of truth. The BM25 side is a cache keyed by the collection's generation
marker, and the only way to change the collection is a `Write`:

1. it marks the collection as being written (generation ``w-<new>``) before any change,
2. makes its changes,
3. saves the BM25 side of ``<new>``: when the saved one is the collection's previous generation,
   one segment of the chunks it wrote and the rows it replaced or deleted marked dead (a cost
   that follows the change, not the index; `store.segments`), else a full build from Chroma,
4. sets the collection's generation to ``<new>``,
5. and, when the segments have grown many, merges them (same rows, same generation).

A BM25 index whose generation differs from the collection's is stale and is rebuilt from Chroma,
so the two agree even after an interrupted ingest or on another machine reading the same Chroma
server. A BM25 index built while a write is under way is never saved: a crash would leave it
looking current.

A process serving questions sees a write as soon as step 4 is done: the next question reads the
new manifest and only the segments it does not hold yet. Queries never wait for a full rebuild
while there is an older snapshot to serve: the stale one keeps answering (a chunk deleted since
is dropped when its text is fetched; one added since is found once the fresh one is in, or at
once by a Chroma server's own dense search) while a fresh one is built once, in the background.
"""

from __future__ import annotations

import re
import shutil
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import EmptyIndexError, IndexNotFoundError
from core.models import IndexStats, ModelSpec, Paper
from core.settings import Settings
from core.tokens import words
from store.bm25 import BM25Index
from store.chroma import (
    ChunkCollection,
    delete_collection,
    open_client,
    open_collection,
    reaching,
)
from store.records import StoredChunk, stitch
from store.segments import Manifest, Part, Segment

WRITING = "w-"
"""Prefix of the generation marker while a write session is under way."""


def is_writing(generation: str) -> bool:
    """Whether the collection is being written (or a write was interrupted)."""
    return generation.startswith(WRITING)


@dataclass(frozen=True)
class Snapshot:
    """The index as one question sees it: the collection and the BM25 side of one generation."""

    chunks: ChunkCollection
    bm25: BM25Index
    shared: bool = False
    """Whether the collection is on a Chroma server, whose own nearest-neighbour search sees
    every write. An embedded collection's does not see another process's writes (its HNSW index
    is loaded once per process; measured with chromadb 1.5): a question then ranks by meaning
    over the snapshot's own vectors, exactly."""

    def unmentioned(self, names: Sequence[str]) -> list[str]:
        """The names no indexed abstract or title mentions in any spelling the index knows:
        case, hyphens and spaces aside ("Quokka-SGD", "quokka sgd" and "QuokkaSGD" are one
        name), a plural "s" aside. A name the index holds as one word is mentioned; otherwise
        the chunks holding each spelling's search words are read and compared whole, so a
        name whose words all occur apart ("Vela" ... "Net") is still unmentioned."""
        missing = []
        for name in names:
            key = compact(name)
            whole = words([key])[0]
            if len(key) < 3 or (len(whole) == 1 and self.bm25.df(whole[0])):
                continue  # written as one word somewhere ("DASHA", "decdtw"): no text to read
            rows: set[int] = set()
            for spelling in {name, _UNCAMEL.sub(" ", name), key}:  # DecDTW, Dec DTW, decdtw
                terms = words([spelling])[0]
                if terms and all(self.bm25.df(t) for t in terms):
                    rows.update(np.flatnonzero(self.bm25.holding_all(terms)).tolist())
            if len(rows) > MENTION_READS:
                continue  # words this common together: a name the corpus uses
            found = self.chunks.get([self.bm25.chunk_ids[r] for r in sorted(rows)]).values()
            keys = {key, key.removesuffix("s")}
            if not any(k in compact(f"{c.title} {c.text}") for c in found for k in keys):
                missing.append(name)
        return missing


def compact(text: str) -> str:
    """Text without case, spaces, hyphens or punctuation: how a name is compared."""
    return _NOT_ALNUM.sub("", text.casefold())


_NOT_ALNUM = re.compile(r"[\W_]+")
_UNCAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|-")
MENTION_READS = 200  # chunks read to check one name's spelling; past this it counts as mentioned


@dataclass
class Write:
    """One write session. Changes go to Chroma as they are made; the BM25 side is brought up to
    date when the session ends without an error (an error leaves it stale, to be rebuilt on next
    open)."""

    chunks: ChunkCollection
    generation: str
    written: set[str] = field(default_factory=set)
    """Chunks added, replaced or described anew: their rows are written again."""
    deleted: set[str] = field(default_factory=set)

    def upsert(self, records: Sequence[StoredChunk], vectors: Sequence[Sequence[float]]) -> None:
        self.chunks.upsert(records, vectors)
        self._wrote(r.chunk_id for r in records)

    def update(self, records: Sequence[StoredChunk]) -> None:
        """New metadata for chunks whose text is unchanged."""
        self.chunks.update(records)
        self._wrote(r.chunk_id for r in records)

    def delete(self, ids: Sequence[str]) -> None:
        self.chunks.delete(ids)
        self.deleted.update(ids)
        self.written.difference_update(ids)

    def _wrote(self, ids: Iterable[str]) -> None:
        ids = set(ids)
        self.written |= ids
        self.deleted -= ids


class Index:
    """One collection and its BM25 companion, opened from the settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = open_client(settings)
        self._batch_size: int | None = None
        self._cached: BM25Index | None = None
        self._lock = threading.Lock()
        self._refreshing: str | None = None  # the generation a background rebuild is building

    def where(self) -> str:
        if self.settings.chroma_host:
            return f"Chroma server {self.settings.chroma_host}:{self.settings.chroma_port}"
        return str(self.settings.chroma_dir)

    # --- opening -----------------------------------------------------------------------------
    def chunks(self, spec: ModelSpec | None = None, create: bool = False) -> ChunkCollection | None:
        """The collection (None when there is none); with ``spec``, one built by that model."""
        if self._batch_size is None:
            with reaching(self.client):
                self._batch_size = self.client.get_max_batch_size()
        chunks = open_collection(
            self.client, self.settings.collection, self._batch_size, spec, create
        )
        if chunks is not None and spec is not None:
            chunks.check_model(spec, self.where())
        return chunks

    def snapshot(self, spec: ModelSpec) -> Snapshot:
        """The index for a query: checked for model and emptiness (one round trip to a Chroma
        server), with its BM25 side loaded once per generation and shared by every caller.

        When the BM25 side is stale and a rebuild from Chroma is needed, the last snapshot keeps
        serving while a fresh one is built once in the background (see the module's docstring);
        a question waits only when there is nothing older to serve."""
        chunks = self.chunks(spec)
        add = (
            "Add papers with `abstract-qa ingest PATH` (the bundled sample: `make run` or "
            "`abstract-qa ingest --sample`)."
        )
        if chunks is None:
            raise IndexNotFoundError(
                f"There is no index {self.settings.collection!r} in {self.where()} yet. {add} "
                "If you indexed under another name, set AQA_COLLECTION to it."
            )
        if chunks.count() == 0:
            raise EmptyIndexError(f"The index in {self.where()} is empty. {add}")
        generation = chunks.generation
        with self._lock:
            if self._cached is None or self._cached.generation != generation:
                if BM25Index.saved_generation(self._bm25_root()) == generation:
                    # saved by the write that made it: only the segments not held yet are read
                    fresh = BM25Index.load(self._bm25_root(), reuse=self._cached)
                    self._cached = fresh or self.bm25(chunks)
                elif self._cached is None:
                    # stale but whole: serve it meanwhile; with nothing saved, build it now
                    self._cached = self.saved_bm25() or self.bm25(chunks)
            if self._cached.generation != generation and self._refreshing != generation:
                self._refreshing = generation
                threading.Thread(
                    target=self._refresh, args=(chunks,), daemon=True, name="aqa-bm25"
                ).start()
            return Snapshot(chunks, self._cached, shared=bool(self.settings.chroma_host))

    def _refresh(self, chunks: ChunkCollection) -> None:
        try:
            bm25 = self.bm25(chunks)
            with self._lock:
                self._cached = bm25
        finally:
            with self._lock:
                self._refreshing = None

    # --- the BM25 side -----------------------------------------------------------------------
    def _bm25_root(self) -> Path:
        root = self.settings.bm25_dir
        if self.settings.chroma_host:
            # One cache per server and collection, so switching servers never mixes them.
            key = f"{self.settings.chroma_host}_{self.settings.chroma_port}"
            root = root / "".join(c if c.isalnum() else "_" for c in key)
        return root / self.settings.collection

    def saved_bm25(self) -> BM25Index | None:
        """The BM25 index on disk as it is, stale or not (None when there is none)."""
        return BM25Index.load(self._bm25_root())

    def bm25(self, chunks: ChunkCollection) -> BM25Index:
        """The BM25 index matching the collection now, rebuilt if it is missing or stale."""
        generation = chunks.generation
        if BM25Index.saved_generation(self._bm25_root()) == generation:
            saved = self.saved_bm25()
            if saved is not None and saved.generation == generation:
                return saved
        return self.rebuild(chunks)

    def repair(self, chunks: ChunkCollection) -> None:
        """Rebuild the BM25 side if a write left it stale (when it is current, this reads one
        file, not the index)."""
        if BM25Index.saved_generation(self._bm25_root()) != chunks.generation:
            self.rebuild(chunks)

    def rebuild(self, chunks: ChunkCollection) -> BM25Index:
        """The BM25 side built from Chroma, and saved unless a write is under way (it may still
        change the collection)."""
        generation = chunks.generation
        bm25 = self._build(chunks, generation)
        if not is_writing(generation):
            bm25.save(self._bm25_root())
        return bm25

    @staticmethod
    def _build(chunks: ChunkCollection, generation: str) -> BM25Index:
        return BM25Index.build(chunks.scan(documents=True, vectors=True), generation)

    # --- writing -----------------------------------------------------------------------------
    @contextmanager
    def write(self, chunks: ChunkCollection) -> Iterator[Write]:
        """The one way to change the index (see the module's docstring)."""
        previous = chunks.generation
        generation = uuid.uuid4().hex
        chunks.set_generation(WRITING + generation)  # before any change: a crash is visible
        session = Write(chunks, generation)
        yield session
        root = self._bm25_root()
        saved = Manifest.load(root)
        if saved is None or saved[0].generation != previous or is_writing(previous):
            self._build(chunks, generation).save(root)
            chunks.set_generation(generation)
            return
        added = None
        if session.written:  # as Chroma now holds them: text, metadata and vector
            added = Segment.build(chunks.with_vectors(sorted(session.written)))
            added.save(root)
        manifest = saved[0].changed(root, session.written | session.deleted, added, generation)
        manifest.save(root)
        chunks.set_generation(generation)
        self.merge()

    def merge(self) -> None:
        """Merge the saved segments when they have grown many or hold many deleted rows (see
        `Manifest.merging`). The rows and the generation stay the same, so a
        kill at any point leaves either manifest whole and current."""
        root = self._bm25_root()
        saved = Manifest.load(root)
        start = None if saved is None else saved[0].merging()
        if saved is None or start is None:
            return
        manifest = saved[0]
        parts = manifest.parts[start:]
        merged = Segment.merge([(Segment.load(root, p.name), p.keep()) for p in parts])
        merged.save(root)
        kept = manifest.parts[:start] + ((Part(merged.name, len(merged)),) if len(merged) else ())
        Manifest(manifest.generation, kept).save(root)

    def drop(self) -> None:
        """Delete the collection and its BM25 index (for --rebuild)."""
        delete_collection(self.client, self.settings.collection)
        shutil.rmtree(self._bm25_root(), ignore_errors=True)

    # --- what the index holds ----------------------------------------------------------------
    def stored(self, chunks: ChunkCollection, paper_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The chunk records of ``paper_ids`` without their text, by id (what a re-ingest
        compares), looked up by id: a few papers into a large index cost what they are, not
        what the index is (0.15 ms a paper, where a scan of the 22k index takes 3.6 s;
        docs/benchmarks.md, "Incremental ingest")."""
        return chunks.of_papers(paper_ids)

    def same_papers(
        self,
        chunks: ChunkCollection,
        keys: Sequence[str],
        identity: Callable[[StoredChunk], Sequence[str]],
        progress: Callable[[int, int], None] | None = None,
    ) -> list[StoredChunk]:
        """The first chunks (without text) of the indexed papers holding any of these identity
        keys (``doi:...``, ``arxiv:...``, ``title:...``), looked up: a cost that follows the
        keys, not the index. A collection written before the keys were stored is labelled first,
        once, with ``identity`` of each paper's first chunk (one read of them all and one
        metadata update each: 13 s at 22k papers; ``progress(done, total)`` follows it). It is
        marked as labelled only if no write ran meanwhile (a paper it changed may have been
        given keys read before): else it is labelled again at the next lookup."""
        if not chunks.identified:
            before = chunks.generation_now()
            heads = [(head.chunk_id, identity(head)) for head in chunks.heads()]
            chunks.identify(heads, progress)
            if chunks.generation_now() == before and not is_writing(before):
                chunks.mark_identified()
        return chunks.same_as(keys)

    def paper(self, paper_id: str) -> Paper | None:
        """The paper with this id as the index holds it (None when there is none)."""
        chunks = self.chunks()
        return None if chunks is None else stitch(chunks.of_paper(paper_id))

    def paper_ids(self) -> set[str]:
        chunks = self.chunks()
        return set() if chunks is None else {r.paper_id for r, _ in chunks.scan()}

    def stats(self) -> IndexStats:
        """Papers, chunks, venues and years in the index; the model that built it."""
        chunks = self.chunks()
        papers: dict[str, StoredChunk] = {}
        count = 0
        model: tuple[str | None, int | None] = (None, None)
        if chunks is not None:
            model = chunks.model
            for record, _ in chunks.scan():
                count += 1
                papers.setdefault(record.paper_id, record)
        venues = Counter(r.venue or "unknown" for r in papers.values())
        years = Counter(str(r.year) if r.year is not None else "unknown" for r in papers.values())
        host = self.settings.chroma_host
        return IndexStats(
            papers=len(papers),
            chunks=count,
            venues=dict(venues.most_common()),
            years=dict(sorted(years.items())),
            embedding_model=model[0],
            embedding_dim=model[1],
            data_dir=self.settings.data_dir,
            chroma=f"{host}:{self.settings.chroma_port}" if host else "embedded",
        )

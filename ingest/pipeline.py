"""The ingest step end to end: read, chunk, embed what changed, write it to the store.

`plan` decides what changes (pure: papers and the stored records in, a `Plan` out); `ingest`
carries it out in one write session of the store, which keeps Chroma and BM25 in step.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

from core.models import Chunk, IngestReport, ModelSpec, Paper, Problem, chunk_id
from core.settings import Settings
from core.text import RENDER_VERSION
from ingest.chunk import chunk_paper, chunk_papers
from ingest.embed import Embedder, get_embedder
from ingest.identity import Keys, adopted, known_keys, said
from ingest.read import ReadResult, read_paths
from store.index import Index, Write, is_writing
from store.records import StoredChunk, paper_hash

T = TypeVar("T")
Progress = Callable[[str, int, int], None]
"""Called as progress(stage, done, total) while embedding and indexing."""

# Bump when chunk metadata gains a field: papers are re-chunked once and their metadata updated
# in place (the text is unchanged, so nothing is embedded again).
LAYOUT = "m4"
ROUND = 512  # chunks embedded and written per round: the unit an interruption can lose


def _noop(stage: str, done: int, total: int) -> None:
    return None


@dataclass
class Plan:
    """What an ingest run changes in the index."""

    embed: list[tuple[StoredChunk, str]] = field(default_factory=list)
    """New chunks and chunks whose embedded text changed, with that text."""
    update: list[StoredChunk] = field(default_factory=list)
    """Chunks whose text is unchanged but whose metadata changed: no embedding."""
    delete: list[str] = field(default_factory=list)
    """Chunks of the papers read that the papers no longer make."""
    chunks: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def changes(self) -> bool:
        return bool(self.embed or self.update or self.delete)


def plan(
    papers: Sequence[Paper],
    stored: dict[str, StoredChunk],
    chunking: str,
    chunker: Callable[[Paper], list[Chunk]],
    processes: int = 1,
) -> Plan:
    """Compare the papers read with what the index holds (``stored``, by chunk id).

    A paper whose record and ``chunking`` are unchanged keeps its chunks without being chunked
    again; the others are chunked, and each chunk is new, re-embedded (its text changed),
    updated (only its metadata changed) or unchanged. Chunks of a paper read that it no longer
    makes are deleted; papers not read are left alone. ``processes`` may share the chunking
    (see `chunk_papers`)."""
    todo = Plan()
    wanted: set[str] = set()
    changed: list[Paper] = []
    for paper in papers:
        head = stored.get(chunk_id(paper.paper_id, 0))
        if head is not None and head.paper_hash == paper_hash(paper, chunking):
            ids = [chunk_id(paper.paper_id, i) for i in range(head.n_chunks)]
            if all(cid in stored for cid in ids):
                todo.unchanged += len(ids)
                wanted.update(ids)
                continue
        changed.append(paper)
    for paper, chunks in zip(changed, chunk_papers(chunker, changed, processes), strict=True):
        keys = identity(paper)
        for chunk in chunks:
            wanted.add(chunk.chunk_id)
            record = StoredChunk.of(paper, chunk, len(chunks), chunking, keys)
            old = stored.get(chunk.chunk_id)
            if old is None or old.content_hash != record.content_hash:
                todo.embed.append((record, chunk.embed_text))
                todo.added += old is None
                todo.updated += old is not None
            elif old.meta_hash != record.meta_hash:
                todo.update.append(record)
                todo.updated += 1
            else:
                todo.unchanged += 1
    read = {paper.paper_id for paper in papers}
    todo.delete = [cid for cid, s in stored.items() if s.paper_id in read and cid not in wanted]
    todo.chunks = len(wanted)
    return todo


def chunking_of(settings: Settings, spec: ModelSpec) -> tuple[str, Callable[[Paper], list[Chunk]]]:
    """How papers are chunked for this model: the key stored with each paper (a change makes a
    re-ingest chunk it again) and the chunker."""
    max_tokens = settings.chunk_tokens or spec.chunk_tokens
    overlap = settings.chunk_overlap_tokens
    key = f"{spec.name}|{max_tokens}|{overlap}|{LAYOUT}|{RENDER_VERSION}"
    return key, partial(chunk_paper, max_tokens=max_tokens, overlap_tokens=overlap)


class _Clock:
    """Seconds per named step, summed over repeats."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - t


def ingest(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    progress: Progress = _noop,
    processes: int = 1,
    forced: str | None = None,
) -> IngestReport:
    """Bring the index up to date with the papers under ``paths``; safe to interrupt and re-run.

    ``processes`` > 1 chunks a large corpus in that many spawned processes: the calling
    script's main module must then be import-safe (``if __name__ == "__main__":``).
    ``forced`` reads every file as that format (see `ingest.read.read_paths`)."""
    started = time.perf_counter()
    clock = _Clock()
    with clock("read"):
        read = read_paths(paths, forced)
    report = IngestReport(
        files=read.files,
        papers=len(read.papers),
        skipped=read.skipped,
        warnings=read.warnings,
        merged=read.merged,
        formats=read.formats,
    )
    embedder = get_embedder(settings)
    index = Index(settings)
    if rebuild:
        index.drop()
    if read.papers or index.chunks() is not None:
        chunks = index.chunks(embedder.spec, create=True)
        assert chunks is not None
        with clock("diff"):
            papers = read.papers
            if read.keys:  # library records: an indexed paper with one of their keys is theirs
                wanted = sorted({key for keys in read.keys.values() for key in keys.all()})
                labelling = partial(progress, "labelling indexed papers (once)")
                heads = index.same_papers(chunks, wanted, identity, labelling)
                papers = adopt_ids(read, heads, report.merged)
            # what the diff needs of the index: the papers read, by id
            stored = index.stored(chunks, [paper.paper_id for paper in papers])
        chunking, chunker = chunking_of(settings, embedder.spec)
        with clock("chunk"):
            todo = plan(papers, stored, chunking, chunker, processes)
        report.chunks, report.added, report.updated = todo.chunks, todo.added, todo.updated
        report.unchanged, report.removed = todo.unchanged, len(todo.delete)
        report.embedded = len(todo.embed)
        clock.seconds |= {"embed": 0.0, "index": 0.0}  # "model" only when it was loaded
        with clock("bm25"):  # the write session rebuilds BM25 as it closes
            if todo.changes or is_writing(chunks.generation):  # also ends an interrupted write
                with index.write(chunks) as session:
                    _write(session, todo, embedder, clock, progress)
                    progress("bm25", 0, 1)
            else:
                progress("bm25", 0, 1)
                index.repair(chunks)  # a BM25 side left stale by an interrupted run
        clock.seconds["bm25"] -= sum(clock.seconds.get(k, 0.0) for k in ("model", "embed", "index"))
        progress("bm25", 1, 1)
    report.timings = {k: round(v, 3) for k, v in clock.seconds.items()}
    report.seconds = round(time.perf_counter() - started, 3)
    return report


NICE = 10
"""How much lower the CPU priority of an ingest beside questions is (Linux ``nice``)."""


def beside_queries(work: Callable[[], T]) -> T:
    """``work()`` in a thread of its own at a lower CPU priority, for a process that answers
    questions meanwhile (`serve`): the questions keep their latency and the ingest takes the CPU
    they leave. On Linux the priority is the thread's own and passes to the threads it starts
    (the embedding model's workers); elsewhere ``work`` runs as it is. Returns its result or
    raises its error."""
    done: dict[str, Any] = {}

    def run() -> None:
        if sys.platform == "linux":
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        try:
            done["result"] = work()
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=run, name="aqa-ingest")
    thread.start()
    thread.join()
    if "error" in done:
        raise done["error"]
    return cast(T, done["result"])


def remove(paper_ids: Sequence[str], settings: Settings) -> IngestReport:
    """Delete these papers from the index (every chunk of each), in one write session, so the
    servers reading it stop citing them as soon as it ends. Ids the index does not hold are
    reported under ``skipped``; ``papers`` counts the papers removed, ``removed`` their
    chunks."""
    started = time.perf_counter()
    clock = _Clock()
    report = IngestReport()
    index = Index(settings)
    chunks = index.chunks()
    wanted = list(dict.fromkeys(paper_ids))
    with clock("diff"):
        stored = index.stored(chunks, wanted) if chunks is not None and wanted else {}
    held = {record.paper_id for record in stored.values()}
    report.skipped = [
        Problem(file=pid, reason="no paper with this id in the index")
        for pid in wanted
        if pid not in held
    ]
    if chunks is not None and stored:
        with clock("bm25"), index.write(chunks) as session, clock("index"):
            session.delete(sorted(stored))
        clock.seconds["bm25"] -= clock.seconds["index"]
    report.papers, report.removed = len(held), len(stored)
    report.timings = {k: round(v, 3) for k, v in clock.seconds.items()}
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def identity(paper: Paper | StoredChunk) -> list[str]:
    """A paper's keys in every export of it: its DOI, arXiv id and title key (not a title made
    from the text), as stored on its first chunk and looked up by `adopt_ids`."""
    title = None if paper.title_derived else paper.title
    return Keys.of(paper.doi, paper.arxiv_id, title).all()


def adopt_ids(read: ReadResult, heads: Sequence[StoredChunk], merged: list[Problem]) -> list[Paper]:
    """The papers read, each one the index already holds under another id (the same DOI, arXiv
    id or title, from another export of the library) given that id, so that it is updated, not
    added twice. Papers whose id the corpus gave keep it. ``heads`` are the first chunks of the
    indexed papers that share a key with the papers read (`store.index.Index.same_papers`)."""
    if not read.keys or not heads:
        return read.papers
    known = known_keys(
        (s.paper_id, s.doi, s.arxiv_id, None if s.title_derived else s.title) for s in heads
    )
    taken = {paper.paper_id: paper.source for paper in read.papers}  # id -> who writes it
    papers = []
    for paper in read.papers:
        keys = read.keys.get(paper.paper_id)
        found = adopted(keys, known) if keys else None
        if found is None or found[0].paper_id == paper.paper_id:
            papers.append(paper)
            continue
        indexed, key = found
        file, _, line = paper.source.rpartition(":")
        where = {"file": file, "line": int(line) if line.isdigit() else None}
        if indexed.paper_id in taken:  # another record of this run updates that paper
            reason = (
                f"same paper (by {said(key)}) as indexed paper {indexed.paper_id!r}, which "
                f"{taken[indexed.paper_id]} updates in this run; not read twice"
            )
            merged.append(Problem(**where, reason=reason))
            continue
        taken[indexed.paper_id] = paper.source
        reason = f"same paper (by {said(key)}) as indexed paper {indexed.paper_id!r}; updated it"
        merged.append(Problem(**where, reason=reason))
        update = {
            "paper_id": indexed.paper_id,
            "doi": paper.doi or indexed.doi,
            "arxiv_id": paper.arxiv_id or indexed.arxiv_id,
        }
        papers.append(paper.model_copy(update=update))
    return papers


def _write(
    session: Write, todo: Plan, embedder: Embedder, clock: _Clock, progress: Progress
) -> None:
    """Embed and write the plan in rounds of ``ROUND`` chunks, then the metadata-only updates
    and the deletions.

    Longest texts first: memory peaks in the first round, and each round holds texts of about
    one length, which the local model then batches by their word piece counts."""
    todo_embed = sorted(todo.embed, key=lambda pair: -len(pair[1]))
    if todo_embed and not embedder.loaded:  # once per process: a running server has it
        with clock("model"):
            embedder.load()
    for start in range(0, len(todo_embed), ROUND):
        batch = todo_embed[start : start + ROUND]
        with clock("embed"):
            vectors = embedder.embed_documents([text for _, text in batch])
        with clock("index"):
            session.upsert([record for record, _ in batch], vectors)
        progress("embedding", min(start + ROUND, len(todo.embed)), len(todo.embed))
    with clock("index"):
        session.update(todo.update)
        session.delete(todo.delete)

"""The ingest step end to end: read, chunk, embed what changed, index, refresh BM25."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.models import Chunk, IngestReport, Paper
from app.settings import Settings
from ingest.chunk import chunk_paper
from ingest.embed import get_embedder
from ingest.index import Index, chunk_metadata, paper_hash
from ingest.read import read_paths
from ingest.text import RENDER_VERSION

Progress = Callable[[str, int, int], None]
"""Called as progress(stage, done, total) while embedding and indexing."""

# Bump when chunk metadata gains a field: papers are re-chunked once and their metadata updated
# in place (the text is unchanged, so nothing is embedded again).
LAYOUT = "m2"
ROUND = 512  # chunks embedded and written per round: the unit an interruption can lose


def _noop(stage: str, done: int, total: int) -> None:
    return None


def ingest(
    paths: Sequence[str | Path],
    settings: Settings,
    *,
    rebuild: bool = False,
    progress: Progress = _noop,
) -> IngestReport:
    """Bring the index up to date with the papers under ``paths``; safe to interrupt and re-run."""
    started = time.perf_counter()
    timings: dict[str, float] = {}

    t = time.perf_counter()
    read = read_paths(paths)
    timings["read"] = time.perf_counter() - t
    report = IngestReport(
        files=read.files, papers=len(read.papers), skipped=read.skipped, warnings=read.warnings
    )

    embedder = get_embedder(settings)
    max_tokens = settings.chunk_tokens or embedder.spec.chunk_tokens
    index = Index(settings)
    if rebuild:
        index.drop()
    if not read.papers and index.collection() is None:
        report.seconds = time.perf_counter() - started
        return report
    col = index.collection(embedder.spec, create=True)
    assert col is not None

    t = time.perf_counter()
    stored = index.stored(col)
    timings["diff"] = time.perf_counter() - t

    # A paper whose record and chunking are unchanged keeps its chunks: no chunking, no embedding.
    t = time.perf_counter()
    model = embedder.spec.name
    chunking = f"{model}|{max_tokens}|{settings.chunk_overlap_tokens}|{LAYOUT}|{RENDER_VERSION}"
    wanted: set[str] = set()
    planned: list[tuple[Paper, Chunk, int]] = []
    for paper in read.papers:
        head = stored.get(f"{paper.paper_id}:0")
        if head is not None and head.paper_hash == paper_hash(paper, chunking):
            ids = [f"{paper.paper_id}:{i}" for i in range(head.n_chunks)]
            if all(cid in stored for cid in ids):
                report.unchanged += len(ids)
                wanted.update(ids)
                continue
        chunks = chunk_paper(paper, max_tokens, settings.chunk_overlap_tokens)
        planned += [(paper, chunk, len(chunks)) for chunk in chunks]
        wanted.update(chunk.chunk_id for chunk in chunks)
    timings["chunk"] = time.perf_counter() - t
    report.chunks = len(wanted)

    t = time.perf_counter()
    to_embed: list[tuple[Chunk, dict[str, Any]]] = []
    meta_only: list[tuple[str, dict[str, Any]]] = []
    for paper, chunk, n_chunks in planned:
        meta = chunk_metadata(paper, chunk, n_chunks, chunking)
        old = stored.get(chunk.chunk_id)
        if old is None:
            report.added += 1
            to_embed.append((chunk, meta))
        elif old.content_hash != chunk.content_hash:
            report.updated += 1
            to_embed.append((chunk, meta))
        elif old.meta_hash != meta["meta_hash"]:
            report.updated += 1
            meta_only.append((chunk.chunk_id, meta))
        else:
            report.unchanged += 1
    input_papers = {paper.paper_id for paper in read.papers}
    stale = [cid for cid, s in stored.items() if s.paper_id in input_papers and cid not in wanted]
    report.removed = len(stale)
    report.embedded = len(to_embed)
    timings["diff"] += time.perf_counter() - t

    embed_seconds = write_seconds = 0.0
    if to_embed or meta_only or stale:
        generation = index.begin_write(col)
        for start in range(0, len(to_embed), ROUND):
            batch = to_embed[start : start + ROUND]
            t = time.perf_counter()
            vectors = embedder.embed_documents([chunk.embed_text for chunk, _ in batch])
            embed_seconds += time.perf_counter() - t
            t = time.perf_counter()
            for part in index.batches(list(zip(batch, vectors, strict=True))):
                col.upsert(
                    ids=[chunk.chunk_id for (chunk, _), _ in part],
                    embeddings=[vector for _, vector in part],
                    documents=[chunk.text for (chunk, _), _ in part],
                    metadatas=[meta for (_, meta), _ in part],
                )
            write_seconds += time.perf_counter() - t
            progress("embedding", min(start + ROUND, len(to_embed)), len(to_embed))
        t = time.perf_counter()
        for part in index.batches(meta_only):
            col.update(ids=[cid for cid, _ in part], metadatas=[meta for _, meta in part])
        for part in index.batches(stale):
            col.delete(ids=list(part))
        write_seconds += time.perf_counter() - t
    else:
        generation = index.generation(col)
    timings["embed"] = embed_seconds
    timings["index"] = write_seconds

    t = time.perf_counter()
    progress("bm25", 0, 1)
    if to_embed or meta_only or stale:
        index.build_bm25(col, generation)
    else:
        index.load_bm25(col)  # repairs a BM25 index left stale by an interrupted run
    progress("bm25", 1, 1)
    timings["bm25"] = time.perf_counter() - t

    report.timings = {k: round(v, 3) for k, v in timings.items()}
    report.seconds = round(time.perf_counter() - started, 3)
    return report

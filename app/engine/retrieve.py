"""Hybrid retrieval: dense search in Chroma plus BM25, fused, grouped by paper, filtered."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from threadpoolctl import threadpool_limits

from app.query.record import Query
from core.errors import PaperNotFoundError
from core.models import Filters, Mode, Source, paper_of
from core.settings import Settings
from core.text import sentence_spans
from core.tokens import words
from ingest.embed import Embedder, get_embedder
from store.bm25 import BM25Index
from store.index import Index, Snapshot
from store.records import StoredChunk, search_text

Fusion = Literal["rrf", "convex"]
RRF_K = 60


@dataclass
class Passage:
    chunk: StoredChunk
    similarity: float = 0.0
    fused: float = 0.0

    @property
    def chunk_id(self) -> str:
        return self.chunk.chunk_id


def joined(chunks: Iterable[StoredChunk]) -> str:
    """The passages of one paper as one text, in abstract order: neighbours joined where they
    meet (a sentence the next chunk repeats as overlap is said once), gaps marked with "…"."""
    text, last = "", None
    for chunk in sorted(chunks, key=lambda c: c.index):
        plain = chunk.plain
        if last is not None and chunk.index == last + 1:
            seen = {text[s:e] for s, e in sentence_spans(text)}
            spans = sentence_spans(plain)
            skip = next((s for s, e in spans if plain[s:e] not in seen), len(plain))
            text = f"{text} {plain[skip:]}".rstrip()
        else:
            text = f"{text} … {plain}" if text else plain
        last = chunk.index
    return text


@dataclass
class PaperHit:
    paper_id: str
    passages: list[Passage] = field(default_factory=list)
    lexical: float = 0.0

    @property
    def head(self) -> StoredChunk:
        """The best passage's chunk: it carries the paper's metadata."""
        return self.passages[0].chunk

    @property
    def similarity(self) -> float:
        return max(p.similarity for p in self.passages)

    @property
    def text(self) -> str:
        return joined(p.chunk for p in self.passages)

    @property
    def search_text(self) -> str:
        """What lexical coverage reads: the same title and text BM25 indexed."""
        return search_text(self.head.plain_title, self.head.title_derived, self.text)

    def to_source(self, marker: int) -> Source:
        head = self.head
        return Source(
            marker=marker,
            paper_id=self.paper_id,
            title=head.plain_title,
            authors=list(head.authors),
            **{
                name: getattr(head, name)
                for name in ("title_derived", "year", "venue", "decision", "url", "doi", "arxiv_id")
            },
            text=self.text,
            chunk_ids=[p.chunk_id for p in self.passages],
            score=round(self.similarity, 4),
            lexical=round(self.lexical, 4),
        )


def to_sources(hits: list[PaperHit]) -> list[Source]:
    """Hits as the sources an answer cites, numbered from 1 in rank order."""
    return [hit.to_source(i) for i, hit in enumerate(hits, start=1)]


@dataclass
class Ranking:
    """Candidate chunks of one search: each ranker's order and every candidate's scores."""

    dense: list[str] = field(default_factory=list)
    bm25: list[str] = field(default_factory=list)
    similarity: dict[str, float] = field(default_factory=dict)
    lexical: dict[str, float] = field(default_factory=dict)


class Retriever:
    """Loads the model and opens the store once; every search reuses them."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.embedder = embedder or get_embedder(settings)
        self.index = Index(settings)
        # The vector scans here are small matrix-vector products. OpenBLAS's threads spin after
        # each one and slow the next query embedding in torch: measured at 22k, a filtered
        # search took 56/116 ms p50/p95 with two BLAS threads, 29/35 ms with one.
        threadpool_limits(1, user_api="blas")

    def open(self) -> Snapshot:
        """The index as it is now (one round trip to a Chroma server); pass it to the calls of
        one question so they all see the same generation."""
        return self.index.snapshot(self.embedder.spec)

    def embed(self, text: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_query(text), dtype=np.float32)

    def query(
        self,
        text: str,
        filters: Filters | None = None,
        k: int | None = None,
        mode: Mode = "hybrid",
        at: Snapshot | None = None,
    ) -> Query:
        """``text`` read for search: embedded and cut into search words, once; with the index
        ``at``, a misspelt word is searched as the word meant (`BM25Index.spelled`)."""
        return Query(
            text=text,
            vector=self.embed(text),
            words=tuple(at.bm25.spelled(text) if at is not None else words([text])[0]),
            filters=filters or Filters(),
            k=k or self.settings.top_k,
            mode=mode,
        )

    # --- search ------------------------------------------------------------------------------
    def search(
        self,
        query: Query,
        at: Snapshot | None = None,
        timings: dict[str, float] | None = None,
        chunks_per_paper: int | None = None,
        fusion: Fusion | None = None,
        dense_weight: float | None = None,
    ) -> list[PaperHit]:
        """The top ``query.k`` papers for ``query``, each with up to ``chunks_per_paper``
        passages (the setting unless given)."""
        timings = timings if timings is not None else {}
        k, per_paper = query.k, chunks_per_paper or self.settings.chunks_per_paper
        depth = max(50, k * per_paper * 5)
        at = at or self.open()
        mask = at.bm25.passing(query.filters)

        ranking = Ranking()
        if query.mode in ("hybrid", "dense"):
            t = time.perf_counter()
            ranking.dense = self._rank_dense(at, query.vector, mask, depth, ranking.similarity)
            timings["dense"] = time.perf_counter() - t
        t = time.perf_counter()
        scores = self._rank_bm25(at.bm25, query, mask, depth, ranking)
        timings["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        ranking.lexical = {cid: lexical_score(at.bm25, scores, cid) for cid in ranking.similarity}
        fused = fuse(
            fusion or self.settings.fusion,
            self.settings.dense_weight if dense_weight is None else dense_weight,
            ranking,
        )
        chosen = by_paper(fused, k, per_paper, at.bm25)
        hits = self._fetch(at, chosen, ranking.similarity, fused)
        for hit, share in zip(
            hits, at.bm25.coverage(query.words, [h.search_text for h in hits]), strict=True
        ):
            hit.lexical = share
        timings["fuse"] = time.perf_counter() - t
        return hits

    def _rank_dense(
        self,
        at: Snapshot,
        qvec: np.ndarray,
        mask: np.ndarray | None,
        depth: int,
        similarity: dict[str, float],
    ) -> list[str]:
        """The nearest chunks by meaning, best first; their similarities go to ``similarity``."""
        if mask is None and at.shared:
            ids, sims = at.chunks.nearest(qvec, depth)
        else:
            # An exact scan of the chunk vectors held beside BM25, masked when filtered. One
            # matrix-vector product (~3 ms at 22k) beats Chroma's metadata filter (30 ms and
            # more when few chunks pass), and it filters by author, which Chroma cannot. An
            # embedded collection is always scanned: its HNSW index does not see another
            # process's ingest (`Snapshot.shared`).
            ids, sims = scan(at.bm25, qvec, mask, depth)
        similarity.update(zip(ids, sims, strict=True))
        return ids

    @staticmethod
    def _rank_bm25(
        bm25: BM25Index, query: Query, mask: np.ndarray | None, depth: int, ranking: Ranking
    ) -> np.ndarray:
        """BM25 scores of every chunk; in hybrid and bm25 mode, the best ``depth`` go to
        ``ranking.bm25`` and get their dense similarity from the stored vectors."""
        scores = bm25.scores(query.words)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        if query.mode not in ("hybrid", "bm25") or not len(scores):
            return scores
        top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth]
        top = top[np.argsort(-scores[top])]
        ranking.bm25 = [bm25.chunk_ids[i] for i in top if scores[i] > 0]
        rows = [bm25.position[cid] for cid in ranking.bm25 if cid not in ranking.similarity]
        if rows:
            for row, sim in zip(rows, bm25.vectors[rows] @ query.vector, strict=True):
                ranking.similarity[bm25.chunk_ids[row]] = float(sim)
        return scores

    def related(self, paper_id: str, k: int = 5, at: Snapshot | None = None) -> list[PaperHit]:
        """The ``k`` papers nearest to ``paper_id``: the mean of its chunk vectors against every
        other chunk, exactly (the vectors sit beside BM25)."""
        at = at or self.open()
        bm25 = at.bm25
        papers = paper_of_rows(bm25)
        own = papers == paper_id
        if not own.any():
            raise PaperNotFoundError(paper_id)
        centre = bm25.vectors[own].mean(axis=0)
        centre = centre / (np.linalg.norm(centre) or 1.0)
        sims = bm25.vectors @ centre
        sims[own] = -np.inf
        chosen: dict[str, list[str]] = {}
        similarity: dict[str, float] = {}
        for row in np.argsort(-sims, kind="stable"):
            if not np.isfinite(sims[row]) or len(chosen) == k:
                break
            pid = papers[row]
            if pid not in chosen:
                cid = bm25.chunk_ids[row]
                chosen[pid] = [cid]
                similarity[cid] = float(sims[row])
        return self._fetch(at, chosen, similarity, similarity)

    def whole(self, paper_ids: list[str], at: Snapshot | None = None) -> list[PaperHit]:
        """Each paper with every chunk, text included, in the order asked, in one request: its
        `text` the whole abstract as indexed (LaTeX rendered once, at ingest). An id the index
        does not hold is a PaperNotFoundError naming every such id."""
        at = at or self.open()
        papers = paper_of_rows(at.bm25)
        chosen: dict[str, list[str]] = {p: [] for p in paper_ids}
        for row in np.flatnonzero(np.isin(papers, paper_ids)):
            chosen[str(papers[row])].append(at.bm25.chunk_ids[row])
        if missing := [p for p, cids in chosen.items() if not cids]:
            raise PaperNotFoundError(*missing)
        unranked = {cid: 0.0 for cids in chosen.values() for cid in cids}
        return self._fetch(at, chosen, unranked, unranked)

    @staticmethod
    def _fetch(
        at: Snapshot,
        chosen: dict[str, list[str]],
        similarity: dict[str, float],
        fused: dict[str, float],
    ) -> list[PaperHit]:
        """Text and metadata of the chosen chunks in one request; a chunk deleted since the
        ranking (a concurrent re-ingest) is dropped."""
        records = at.chunks.get([cid for cids in chosen.values() for cid in cids])
        hits: list[PaperHit] = []
        for pid, cids in chosen.items():
            passages = [
                Passage(records[cid], similarity[cid], fused[cid]) for cid in cids if cid in records
            ]
            if passages:
                hits.append(PaperHit(pid, passages))
        return hits


def paper_of_rows(bm25: BM25Index) -> np.ndarray:
    """The paper id of each chunk row of the BM25 side, as an array (for masks)."""
    return np.array([str(p) for p in bm25.facets["paper_id"]])


def scan(
    bm25: BM25Index, qvec: np.ndarray, mask: np.ndarray | None, n: int
) -> tuple[list[str], list[float]]:
    """The ``n`` nearest chunks that pass ``mask`` (every chunk when None), by exact cosine
    similarity."""
    mask = np.ones(len(bm25.chunk_ids), dtype=bool) if mask is None else mask
    rows = np.flatnonzero(mask)
    if not len(rows):
        return [], []
    # memory-bound: a narrow filter reads only the rows that pass; a broad one, the whole
    # matrix in one pass (cheaper than gathering most of it)
    narrow = len(rows) < len(mask) // 4
    sims = bm25.vectors[rows] @ qvec if narrow else (bm25.vectors @ qvec)[rows]
    n = min(n, len(rows))
    top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
    top = top[np.argsort(-sims[top], kind="stable")]
    return [bm25.chunk_ids[rows[i]] for i in top], [float(sims[i]) for i in top]


def lexical_score(bm25: BM25Index, scores: np.ndarray, cid: str) -> float:
    """A candidate's BM25 score (0 for a chunk added since the BM25 snapshot)."""
    row = bm25.position.get(cid)
    return 0.0 if row is None else float(scores[row])


def by_paper(
    fused: dict[str, float], k: int, per_paper: int, bm25: BM25Index
) -> dict[str, list[str]]:
    """The best ``k`` papers' chunk ids, at most ``per_paper`` each, best first."""
    paper_ids = bm25.facets["paper_id"]
    chosen: dict[str, list[str]] = {}
    for cid in sorted(fused, key=lambda c: -fused[c]):
        # a chunk added since the BM25 snapshot has no row; its id names its paper
        row = bm25.position.get(cid)
        pid = str(paper_ids[row]) if row is not None else paper_of(cid)
        if pid not in chosen and len(chosen) == k:
            continue
        if len(chosen.setdefault(pid, [])) < per_paper:
            chosen[pid].append(cid)
    return chosen


def merge_hits(rankings: list[list[PaperHit]], k: int) -> list[PaperHit]:
    """Several rankings as one: in the order given, each paper once, at most ``k``."""
    merged: dict[str, PaperHit] = {}
    for ranking in rankings:
        for hit in ranking:
            merged.setdefault(hit.paper_id, hit)
    return list(merged.values())[:k]


def fuse(fusion: Fusion, dense_weight: float, ranking: Ranking) -> dict[str, float]:
    """One score per candidate chunk. ``rrf``: weighted reciprocal rank fusion; ``convex``: a
    weighted sum of the dense similarity and the BM25 score scaled to [0, 1] by its maximum.
    With one ranking only, its reciprocal rank."""
    if not ranking.bm25 or not ranking.dense:
        alone = ranking.dense or ranking.bm25
        return {cid: 1.0 / (RRF_K + rank + 1) for rank, cid in enumerate(alone)}
    return FUSIONS[fusion](dense_weight, ranking)


def rrf(dense_weight: float, ranking: Ranking) -> dict[str, float]:
    fused: dict[str, float] = defaultdict(float)
    for weight, ranked in ((dense_weight, ranking.dense), (1 - dense_weight, ranking.bm25)):
        for rank, cid in enumerate(ranked):
            fused[cid] += 2 * weight / (RRF_K + rank + 1)
    return dict(fused)


def convex(dense_weight: float, ranking: Ranking) -> dict[str, float]:
    top_lexical = max(ranking.lexical[cid] for cid in ranking.bm25) or 1.0
    return {
        cid: dense_weight * ranking.similarity[cid]
        + (1 - dense_weight) * ranking.lexical.get(cid, 0.0) / top_lexical
        for cid in {*ranking.dense, *ranking.bm25}
    }


FUSIONS: dict[str, Callable[[float, Ranking], dict[str, float]]] = {"rrf": rrf, "convex": convex}

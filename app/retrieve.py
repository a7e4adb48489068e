"""Hybrid retrieval: dense search in Chroma plus BM25, fused, grouped by paper, filtered."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from threadpoolctl import threadpool_limits

from app.errors import EmptyIndexError, InputError
from app.filters import Filters
from app.question import names
from app.settings import Settings
from ingest.embed import Embedder, get_embedder
from ingest.index import BM25Index, Index, author_list, plain_document

Mode = Literal["hybrid", "dense", "bm25"]
Fusion = Literal["rrf", "convex"]
RRF_K = 60


@dataclass
class Passage:
    chunk_id: str
    text: str
    meta: dict[str, Any]
    similarity: float = 0.0
    fused: float = 0.0


@dataclass
class PaperHit:
    paper_id: str
    passages: list[Passage] = field(default_factory=list)
    fused: float = 0.0
    lexical: float = 0.0

    @property
    def meta(self) -> dict[str, Any]:
        return self.passages[0].meta

    @property
    def similarity(self) -> float:
        return max(p.similarity for p in self.passages)

    @property
    def text(self) -> str:
        ordered = sorted(self.passages, key=lambda p: int(p.meta.get("chunk_index", 0)))
        return " … ".join(plain_document(p.meta, p.text) for p in ordered)

    def authors(self) -> list[str]:
        return author_list(self.meta.get("authors"))


class Retriever:
    """Loads the model, client and BM25 index once; every search reuses them."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.embedder = embedder or get_embedder(settings)
        self.index = Index(settings)
        # The vector scans here are small matrix-vector products. OpenBLAS's threads spin after
        # each one and slow the next query embedding in torch: measured at 22k, a filtered
        # search took 56/116 ms p50/p95 with two BLAS threads, 29/35 ms with one.
        threadpool_limits(1, user_api="blas")
        self._bm25: BM25Index | None = None
        self._lock = threading.Lock()

    def open(self) -> Any:
        """The collection, checked for model and emptiness (one round trip to a Chroma server)."""
        col = self.index.collection(self.embedder.spec)
        if col is None or col.count() == 0:
            raise EmptyIndexError(
                f"The index in {self.index.where()} is empty. Add papers with "
                "`abstract-qa ingest PATH` (the bundled sample: `make run` or "
                "`abstract-qa ingest data/sample`)."
            )
        return col

    def bm25(self, col: Any) -> BM25Index:
        generation = Index.generation(col)
        with self._lock:
            if self._bm25 is None or self._bm25.generation != generation:
                self._bm25 = self.index.load_bm25(col)
            return self._bm25

    def typicality(self, query: str, col: Any = None) -> tuple[float, int]:
        """How typical of the corpus the query is (cosine similarity to the mean chunk vector),
        and how many chunks the corpus has."""
        col = col if col is not None else self.open()
        bm25 = self.bm25(col)
        if not len(bm25.centroid):
            return 0.0, 0
        qvec = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        return float(qvec @ bm25.centroid), len(bm25.chunk_ids)

    def unseen_names(self, question: str, col: Any = None) -> list[str]:
        """Names in the question (DecDTW, GPT-4, XYZZY-3) that no indexed abstract contains."""
        col = col if col is not None else self.open()
        return self.bm25(col).unseen(sorted(names(question)))

    def known_venues(self, col: Any = None) -> set[str]:
        col = col if col is not None else self.open()
        return {v for v in self.bm25(col).facets["venue"] if isinstance(v, str)}

    def known_years(self, col: Any = None) -> set[int]:
        col = col if col is not None else self.open()
        return {int(y) for y in set(self.bm25(col).facet_arrays["year"].tolist()) if y >= 0}

    def known_authors(self, col: Any = None) -> dict[str, np.ndarray]:
        """Author keys ("levine", "s levine") to their chunk rows."""
        col = col if col is not None else self.open()
        return self.bm25(col).author_rows

    def author_names(self, col: Any = None) -> list[str]:
        """Every author as written in the corpus, most papers first."""
        col = col if col is not None else self.open()
        return self.bm25(col).author_names

    def search(
        self,
        query: str,
        filters: Filters | None = None,
        k: int | None = None,
        chunks_per_paper: int = 2,
        mode: Mode = "hybrid",
        timings: dict[str, float] | None = None,
        fusion: Fusion | None = None,
        dense_weight: float | None = None,
        col: Any = None,
    ) -> list[PaperHit]:
        """The top ``k`` papers for ``query``, each with up to ``chunks_per_paper`` passages."""
        timings = timings if timings is not None else {}
        filters = filters or Filters()
        k = k or self.settings.top_k
        fusion = fusion or self.settings.fusion
        weight = self.settings.dense_weight if dense_weight is None else dense_weight
        depth = max(50, k * chunks_per_paper * 5)
        col = col if col is not None else self.open()
        bm25 = self.bm25(col)

        t = time.perf_counter()
        qvec = np.asarray(self.embedder.embed_query(query), dtype=np.float32)
        timings["embed_query"] = time.perf_counter() - t

        position = bm25.position
        mask = filters.mask(bm25.facet_arrays, bm25.author_rows)
        # Ranking needs only ids and scores; text and metadata are fetched for the winners.
        similarity: dict[str, float] = {}
        dense_ranking: list[str] = []
        if mode in ("hybrid", "dense"):
            t = time.perf_counter()
            if mask is None:
                dense_ranking, sims = self._dense(col, qvec, depth)
            else:
                # Filtered: an exact scan of the chunk vectors held beside BM25, masked. One
                # matrix-vector product (~3 ms at 22k) beats Chroma's metadata filter (30 ms and
                # more when few chunks pass), and it filters by author, which Chroma cannot.
                dense_ranking, sims = self._scan(bm25, qvec, mask, depth)
            similarity.update(zip(dense_ranking, sims, strict=True))
            timings["dense"] = time.perf_counter() - t

        t = time.perf_counter()
        scores = bm25.scores(query)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        bm25_ranking: list[str] = []
        if mode in ("hybrid", "bm25") and len(scores):
            top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth]
            top = top[np.argsort(-scores[top])]
            bm25_ranking = [bm25.chunk_ids[i] for i in top if scores[i] > 0]
            rows = [position[cid] for cid in bm25_ranking if cid not in similarity]
            if rows:
                for row, sim in zip(rows, bm25.vectors[rows] @ qvec, strict=True):
                    similarity[bm25.chunk_ids[row]] = float(sim)
        timings["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        lexical = {
            cid: float(scores[position[cid]]) if cid in position else 0.0 for cid in similarity
        }
        fused = fuse(fusion, weight, dense_ranking, bm25_ranking, similarity, lexical)
        paper_of = bm25.facets["paper_id"]
        chosen: dict[str, list[str]] = {}
        for cid in sorted(fused, key=lambda c: -fused[c]):
            # a chunk added since the BM25 snapshot is not in `position`; its id names its paper
            pid = str(paper_of[position[cid]]) if cid in position else cid.rsplit(":", 1)[0]
            if pid not in chosen and len(chosen) == k:
                continue
            if len(chosen.setdefault(pid, [])) < chunks_per_paper:
                chosen[pid].append(cid)
        ranked = self._fetch(col, chosen, similarity, fused)
        if ranked:
            texts = [f"{h.meta.get('title', '')}. {h.text}" for h in ranked]
            for hit, cov in zip(ranked, bm25.coverage(query, texts), strict=True):
                hit.lexical = cov
        timings["fuse"] = time.perf_counter() - t
        return ranked

    def related(self, paper_id: str, k: int = 5, col: Any = None) -> list[PaperHit]:
        """The ``k`` papers nearest to ``paper_id``: the mean of its chunk vectors against every
        other chunk, exactly (the vectors sit beside BM25)."""
        col = col if col is not None else self.open()
        bm25 = self.bm25(col)
        papers = np.array([str(p) for p in bm25.facets["paper_id"]])
        own = papers == paper_id
        if not own.any():
            raise InputError(
                f"No paper with id {paper_id!r} in the index: use an id as `ask --json` or "
                "`stats` shows it."
            )
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
        return self._fetch(col, chosen, similarity, similarity)

    @staticmethod
    def _scan(
        bm25: BM25Index, qvec: np.ndarray, mask: np.ndarray, n: int
    ) -> tuple[list[str], list[float]]:
        """The ``n`` nearest chunks that pass ``mask``, by exact cosine similarity."""
        passing = int(mask.sum())
        if not passing:
            return [], []
        sims = np.where(mask, bm25.vectors @ qvec, -np.inf)
        n = min(n, passing)
        top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
        top = top[np.argsort(-sims[top], kind="stable")]
        return [bm25.chunk_ids[i] for i in top], [float(sims[i]) for i in top]

    @staticmethod
    def _dense(
        col: Any, qvec: np.ndarray, n: int, where: dict[str, Any] | None = None
    ) -> tuple[list[str], list[float]]:
        """Chroma's nearest chunks: ids and cosine similarities, best first."""
        found = col.query(
            query_embeddings=[qvec.tolist()], n_results=n, where=where, include=["distances"]
        )
        distances = (found["distances"] or [[]])[0]
        return list(found["ids"][0]), [1.0 - float(d) for d in distances]

    @staticmethod
    def _fetch(
        col: Any,
        chosen: dict[str, list[str]],
        similarity: dict[str, float],
        fused: dict[str, float],
    ) -> list[PaperHit]:
        """Text and metadata of the chosen chunks in one request; a chunk deleted since the
        ranking (a concurrent re-ingest) is dropped."""
        wanted = [cid for cids in chosen.values() for cid in cids]
        if not wanted:
            return []
        got = col.get(ids=wanted, include=["metadatas", "documents"])
        rows = {
            cid: (doc or "", dict(meta or {}))
            for cid, doc, meta in zip(
                got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
            )
        }
        hits: list[PaperHit] = []
        for pid, cids in chosen.items():
            hit = PaperHit(pid)
            for cid in cids:
                if cid in rows:
                    doc, meta = rows[cid]
                    hit.passages.append(Passage(cid, doc, meta, similarity[cid], fused[cid]))
            if hit.passages:
                hit.fused = max(p.fused for p in hit.passages)
                hits.append(hit)
        return hits


def merge_hits(rankings: list[list[PaperHit]], k: int) -> list[PaperHit]:
    """Several rankings as one: in the order given, each paper once, at most ``k``."""
    merged: dict[str, PaperHit] = {}
    for ranking in rankings:
        for hit in ranking:
            merged.setdefault(hit.paper_id, hit)
    return list(merged.values())[:k]


def fuse(
    fusion: Fusion,
    dense_weight: float,
    dense_ranking: list[str],
    bm25_ranking: list[str],
    similarity: dict[str, float],
    lexical: dict[str, float],
) -> dict[str, float]:
    """One score per candidate chunk. ``rrf``: weighted reciprocal rank fusion; ``convex``: a
    weighted sum of the dense similarity and the BM25 score scaled to [0, 1] by its maximum."""
    fused: dict[str, float] = defaultdict(float)
    if not bm25_ranking or not dense_ranking:
        for rank, cid in enumerate(dense_ranking or bm25_ranking):
            fused[cid] = 1.0 / (RRF_K + rank + 1)
        return fused
    if fusion == "rrf":
        for weight, ranking in ((dense_weight, dense_ranking), (1 - dense_weight, bm25_ranking)):
            for rank, cid in enumerate(ranking):
                fused[cid] += 2 * weight / (RRF_K + rank + 1)
        return fused
    top_lexical = max(lexical[cid] for cid in bm25_ranking) or 1.0
    for cid in {*dense_ranking, *bm25_ranking}:
        fused[cid] = dense_weight * similarity[cid] + (1 - dense_weight) * (
            lexical.get(cid, 0.0) / top_lexical
        )
    return fused

"""Hybrid retrieval: dense search in Chroma plus BM25, fused, grouped by paper, filtered."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from app.errors import EmptyIndexError
from app.filters import Filters
from app.settings import Settings
from ingest.embed import Embedder, get_embedder
from ingest.index import BM25Index, Index
from ingest.text import plain_text

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
        return " … ".join(plain_text(p.text) for p in ordered)

    def authors(self) -> list[str]:
        try:
            return list(json.loads(self.meta.get("authors", "[]")))
        except ValueError:
            return []


class Retriever:
    """Loads the model, client and BM25 index once; every search reuses them."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.embedder = embedder or get_embedder(settings)
        self.index = Index(settings)
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

    def known_venues(self, col: Any = None) -> set[str]:
        col = col if col is not None else self.open()
        return {v for v in self.bm25(col).facets["venue"] if isinstance(v, str)}

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

        passages: dict[str, Passage] = {}
        dense_ranking: list[str] = []
        if mode in ("hybrid", "dense"):
            t = time.perf_counter()
            found = col.query(
                query_embeddings=[qvec.tolist()],
                n_results=depth,
                where=filters.chroma_where(),
                include=["metadatas", "documents", "distances"],
            )
            dense_ranking = list(found["ids"][0])
            for cid, doc, meta, dist in zip(
                dense_ranking,
                (found["documents"] or [[]])[0],
                (found["metadatas"] or [[]])[0],
                (found["distances"] or [[]])[0],
                strict=True,
            ):
                passages[cid] = Passage(cid, doc or "", dict(meta or {}), 1.0 - float(dist))
            timings["dense"] = time.perf_counter() - t

        t = time.perf_counter()
        scores = bm25.scores(query)
        mask = filters.mask(bm25.facets)
        if mask is not None:
            scores = np.where(mask, scores, 0.0)
        position = bm25.position
        bm25_ranking: list[str] = []
        if mode in ("hybrid", "bm25"):
            top = np.argsort(-scores)[:depth]
            bm25_ranking = [bm25.chunk_ids[i] for i in top if scores[i] > 0]
        timings["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        missing = [cid for cid in bm25_ranking if cid not in passages]
        if missing:
            got = col.get(ids=missing, include=["metadatas", "documents", "embeddings"])
            vectors = got["embeddings"] if got["embeddings"] is not None else []
            for cid, doc, meta, vec in zip(
                got["ids"], got["documents"] or [], got["metadatas"] or [], vectors, strict=True
            ):
                sim = float(np.dot(np.asarray(vec, dtype=np.float32), qvec))
                passages[cid] = Passage(cid, doc or "", dict(meta or {}), sim)
        # deleted since the BM25 snapshot: drop
        bm25_ranking = [cid for cid in bm25_ranking if cid in passages]
        lexical = {
            cid: float(scores[position[cid]]) if cid in position else 0.0 for cid in passages
        }
        fused = fuse(fusion, weight, dense_ranking, bm25_ranking, passages, lexical)

        papers: dict[str, PaperHit] = {}
        for cid in sorted(fused, key=lambda c: -fused[c]):
            passage = passages[cid]
            passage.fused = fused[cid]
            pid = str(passage.meta.get("paper_id", cid))
            hit = papers.setdefault(pid, PaperHit(pid))
            if len(hit.passages) < chunks_per_paper:
                hit.passages.append(passage)
                hit.fused = max(hit.fused, passage.fused)
        ranked = sorted(papers.values(), key=lambda h: -h.fused)[:k]
        if ranked:
            texts = [f"{h.meta.get('title', '')}. {h.text}" for h in ranked]
            for hit, cov in zip(ranked, bm25.coverage(query, texts), strict=True):
                hit.lexical = cov
        timings["fuse"] = time.perf_counter() - t
        return ranked


def fuse(
    fusion: Fusion,
    dense_weight: float,
    dense_ranking: list[str],
    bm25_ranking: list[str],
    passages: dict[str, Passage],
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
        fused[cid] = dense_weight * passages[cid].similarity + (1 - dense_weight) * (
            lexical.get(cid, 0.0) / top_lexical
        )
    return fused

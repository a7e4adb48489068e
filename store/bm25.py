"""The lexical side of the store: BM25 over every chunk, with the per-chunk facts a query needs
without asking Chroma (facets for filters, the chunk vectors), saved beside Chroma.

This is the only module that imports bm25s. Words come from `core.tokens.words`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

from core.models import Filters
from core.text import author_key, same_author
from core.tokens import WORDS_VERSION, words
from store.records import StoredChunk

LAYOUT = "6"  # bump when the saved layout changes: saved indexes are rebuilt from Chroma
FACETS = ("paper_id", "year", "venue", "decision", "authors")
"""Chunk metadata kept beside BM25, so filters apply without asking Chroma."""


@dataclass
class BM25Index:
    """BM25 over every chunk, plus facets for filters and the chunk vectors (row ``i`` is
    ``chunk_ids[i]``), so a chunk only BM25 found gets its dense similarity locally."""

    retriever: bm25s.BM25
    chunk_ids: list[str]
    generation: str
    facets: dict[str, list[Any]]
    vectors: np.ndarray

    @classmethod
    def build(
        cls, rows: Iterable[tuple[StoredChunk, np.ndarray | None]], generation: str
    ) -> BM25Index:
        """From every stored chunk (with its text) and its vector."""
        ids: list[str] = []
        texts: list[str] = []
        vectors: list[np.ndarray] = []
        facets: dict[str, list[Any]] = {name: [] for name in FACETS}
        for record, vector in rows:
            ids.append(record.chunk_id)
            texts.append(record.search_text)
            vectors.append(np.zeros(0, dtype=np.float32) if vector is None else vector)
            facets["paper_id"].append(record.paper_id)
            facets["year"].append(record.year)
            facets["venue"].append(record.venue)
            facets["decision"].append(record.decision)
            facets["authors"].append(list(record.authors))
        retriever = bm25s.BM25()
        if texts:
            retriever.index(words(texts), show_progress=False)
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        return cls(retriever, ids, generation, facets, matrix)

    # --- what filters and the app read -------------------------------------------------------
    @cached_property
    def facet_arrays(self) -> dict[str, np.ndarray]:
        """The facets as arrays: year (-1 when unknown), venue and decision case-folded."""
        return {
            "year": np.array(
                [y if isinstance(y, int) else -1 for y in self.facets["year"]], dtype=np.int64
            ),
            **{
                name: np.array(
                    [v.casefold() if isinstance(v, str) else "" for v in self.facets[name]],
                    dtype=str,
                )
                for name in ("venue", "decision")
            },
        }

    @cached_property
    def venues(self) -> set[str]:
        """Every venue of the index, as written."""
        return {v for v in self.facets["venue"] if isinstance(v, str)}

    @cached_property
    def years(self) -> set[int]:
        """Every known year of the index."""
        return {int(y) for y in set(self.facet_arrays["year"].tolist()) if y >= 0}

    @cached_property
    def author_rows(self) -> dict[str, dict[str, np.ndarray]]:
        """Rows of the chunks of each author, by surname key ("levine") and then by the name as
        the corpus writes it: the author filter is a union of these, as fast as the other
        facets."""
        rows: dict[str, dict[str, list[int]]] = {}
        for i, names in enumerate(self.facets["authors"]):
            for name in names:
                if (key := author_key(name)) is not None:
                    rows.setdefault(key, {}).setdefault(name, []).append(i)
        return {
            key: {name: np.unique(np.asarray(r, dtype=np.int64)) for name, r in named.items()}
            for key, named in rows.items()
        }

    @cached_property
    def author_names(self) -> list[str]:
        """Every author as written in the corpus, most papers first (for the app's search)."""
        counts: Counter[str] = Counter()
        seen: set[tuple[str, str]] = set()
        for names, paper in zip(self.facets["authors"], self.facets["paper_id"], strict=True):
            for name in names:
                if (name, paper) not in seen:
                    seen.add((name, paper))
                    counts[name] += 1
        return [name for name, _ in counts.most_common()]

    def passing(self, filters: Filters) -> np.ndarray | None:
        """A boolean array over the rows: True where the chunk passes ``filters`` (None when
        they restrict nothing). An author filter passes a paper with any of the names."""
        if not filters.active:
            return None
        facets = self.facet_arrays
        years = facets["year"]
        keep = np.ones(len(years), dtype=bool)
        if filters.year_from is not None or filters.year_to is not None:
            keep &= years >= 0
            if filters.year_from is not None:
                keep &= years >= filters.year_from
            if filters.year_to is not None:
                keep &= years <= filters.year_to
        for name, wanted in (("venue", filters.venues), ("decision", filters.decisions)):
            if wanted:
                keep &= np.isin(facets[name], [w.casefold() for w in wanted])
        if filters.authors:
            by_author = np.zeros(len(years), dtype=bool)
            for typed in filters.authors:
                for name, rows in self.author_rows.get(author_key(typed) or "", {}).items():
                    if same_author(typed, name):
                        by_author[rows] = True
            keep &= by_author
        return keep

    @cached_property
    def centroid(self) -> np.ndarray:
        """The unit mean of the chunk vectors: what a typical question of this corpus is near."""
        if not len(self.vectors):
            return np.zeros(0, dtype=np.float32)
        mean = self.vectors.mean(axis=0)
        return np.asarray(mean / (np.linalg.norm(mean) or 1.0), dtype=np.float32)

    @cached_property
    def position(self) -> dict[str, int]:
        """Row of each chunk id."""
        return {cid: i for i, cid in enumerate(self.chunk_ids)}

    # --- lexical scores ----------------------------------------------------------------------
    def _postings(self) -> tuple[dict[str, int], Any, Any, float]:
        vocab = self.retriever.vocab_dict or {}
        scores: Any = self.retriever.scores or {}
        n = float(scores.get("num_docs", len(self.chunk_ids)) or 1)
        return vocab, scores.get("indptr"), scores.get("indices"), n

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every chunk for a query's search words (`core.tokens.words`); zeros
        when none is indexed."""
        vocab = self.retriever.vocab_dict or {}
        tokens = [t for t in terms if t in vocab]
        if not tokens or not self.chunk_ids:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        return np.asarray(self.retriever.get_scores(tokens), dtype=np.float32)

    def holding_all(self, terms: Sequence[str]) -> np.ndarray:
        """Which chunks hold every one of a query's search words."""
        tokens = sorted(set(terms))
        vocab, indptr, indices, _ = self._postings()
        keep = np.ones(len(self.chunk_ids), dtype=bool) if tokens else np.zeros(0, dtype=bool)
        for token in tokens:
            has = np.zeros(len(self.chunk_ids), dtype=bool)
            if token in vocab and indptr is not None and indices is not None:
                tid = vocab[token]
                has[indices[indptr[tid] : indptr[tid + 1]]] = True
            keep &= has
        return keep if tokens else np.zeros(len(self.chunk_ids), dtype=bool)

    def unseen(self, names: list[str]) -> list[str]:
        """The names no indexed chunk contains (compared as search words: case and stem)."""
        vocab = self.retriever.vocab_dict or {}
        return [
            name
            for name, tokens in zip(names, words(names), strict=True)
            if tokens and not any(t in vocab for t in tokens)
        ]

    def coverage(self, query: Sequence[str], texts: list[str]) -> list[float]:
        """For each text, the share of the query's word weight (idf) that it contains; the
        query as its search words.

        A word the index has never seen weighs the most, so a question about something absent
        from the corpus scores low even when its common words match."""
        terms = set(query)
        if not terms:
            return [0.0] * len(texts)
        vocab, indptr, _, n = self._postings()
        weight = {}
        for term in terms:
            tid = vocab.get(term)
            df = (
                float(indptr[tid + 1] - indptr[tid])
                if tid is not None and indptr is not None
                else 0
            )
            weight[term] = float(np.log(1 + (n - df + 0.5) / (df + 0.5)))
        total = sum(weight.values())
        return [
            sum(w for t, w in weight.items() if t in set(toks)) / total for toks in words(texts)
        ]

    # --- persistence -------------------------------------------------------------------------
    def save(self, root: Path) -> None:
        """Write a new generation folder, then switch CURRENT to it atomically."""
        root.mkdir(parents=True, exist_ok=True)
        target = root / f"gen-{self.generation}-{uuid.uuid4().hex[:8]}"
        if self.chunk_ids:
            self.retriever.save(str(target))
        target.mkdir(parents=True, exist_ok=True)
        np.save(target / "vectors.npy", self.vectors)
        info = {
            "generation": self.generation,
            "layout": f"{WORDS_VERSION}.{LAYOUT}",
            "chunk_ids": self.chunk_ids,
            "facets": self.facets,
        }
        (target / "aqa.json").write_text(json.dumps(info))
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".current-")
        with os.fdopen(fd, "w") as fh:
            fh.write(target.name)
        os.replace(tmp, root / "CURRENT")
        for old in root.glob("gen-*"):
            if old.name != target.name:
                shutil.rmtree(old, ignore_errors=True)

    @staticmethod
    def saved_generation(root: Path) -> str | None:
        """The generation of the index saved under ``root``, without loading it."""
        try:
            name = (root / "CURRENT").read_text().strip()
        except OSError:
            return None
        return name[len("gen-") : -len("-12345678")] if name.startswith("gen-") else None

    @classmethod
    def load(cls, root: Path) -> BM25Index | None:
        """The saved index, or None when there is none or it has another layout."""
        try:
            target = root / (root / "CURRENT").read_text().strip()
            info = json.loads((target / "aqa.json").read_text())
            if info.get("layout") != f"{WORDS_VERSION}.{LAYOUT}":
                return None
            ids = list(info["chunk_ids"])
            retriever = bm25s.BM25.load(str(target), mmap=False) if ids else bm25s.BM25()
            vectors = np.load(target / "vectors.npy")
        except (OSError, ValueError, KeyError):
            return None
        if len(vectors) != len(ids):
            return None
        return cls(retriever, ids, str(info["generation"]), info["facets"], vectors)

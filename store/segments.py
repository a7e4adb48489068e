"""The BM25 side on disk: immutable segments of chunk rows, and the manifest of one generation,
which names its segments and the rows of each deleted since the segment was written.

A write adds one segment (the chunks it wrote) and marks the rows it replaced or deleted as
dead, so its cost follows the size of the change; segments are merged into one when they grow
many or hold many dead rows. Nothing is rewritten in place: a manifest is written, then
``CURRENT`` is switched to it atomically, so a kill at any point leaves the previous manifest
and every segment it names whole.

    root/CURRENT                        the current manifest's name
    root/gen-<generation>-<8 hex>.json  a manifest
    root/seg-<32 hex>/                  a segment: ids.json, rows.json, tf.npz, vectors.npy
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from core.text import author_key
from core.tokens import WORDS_VERSION, words
from store.records import StoredChunk

LAYOUT = "7"  # bump when the saved layout changes: saved indexes are then rebuilt from Chroma
FACETS = ("paper_id", "year", "venue", "decision", "authors")
"""Chunk metadata kept beside BM25, so filters apply without asking Chroma."""
MAX_SEGMENTS = 8
"""More segments than this are merged into one (as are segments with many dead rows)."""
MAX_DEAD = 0.2
"""Share of dead rows above which the segments are merged into one."""


def layout() -> str:
    return f"{WORDS_VERSION}.{LAYOUT}"


@dataclass(frozen=True, eq=False)
class Segment:
    """Chunk rows: ids, facets, the term counts of each (row ``i`` of ``tf`` counts the search
    words of ``chunk_ids[i]``; column ``j`` is ``terms[j]``) and the vectors."""

    name: str
    chunk_ids: list[str]
    facets: dict[str, list[Any]]
    terms: list[str]
    tf: sparse.csr_matrix
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.chunk_ids)

    @cached_property
    def vocab(self) -> dict[str, int]:
        """Column of each term."""
        return {term: j for j, term in enumerate(self.terms)}

    @cached_property
    def postings(self) -> sparse.csc_matrix:
        """The term counts by column: the rows holding a term, and how often, in one slice."""
        return self.tf.tocsc()

    @cached_property
    def authors(self) -> dict[str, dict[str, np.ndarray]]:
        """The rows of each author, by surname key and then by the name as written (see
        `store.bm25.AuthorRows`)."""
        keys: dict[str, str | None] = {}
        rows: dict[str, dict[str, list[int]]] = {}
        for i, names in enumerate(self.facets["authors"]):
            for name in names:
                if name not in keys:
                    keys[name] = author_key(name)
                if (key := keys[name]) is not None:
                    rows.setdefault(key, {}).setdefault(name, []).append(i)
        return {
            key: {name: np.unique(np.asarray(r, dtype=np.int64)) for name, r in named.items()}
            for key, named in rows.items()
        }

    @cached_property
    def lengths(self) -> np.ndarray:
        """Each row's number of search words."""
        return np.asarray(self.tf.sum(axis=1), dtype=np.float32).ravel()

    @classmethod
    def build(cls, rows: Iterable[tuple[StoredChunk, np.ndarray | None]]) -> Segment:
        """From chunks (with their text) and their vectors: their search words counted."""
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
        vocab: dict[str, int] = {}
        data: list[int] = []
        indices: list[int] = []
        indptr = [0]
        for tokens in words(texts):
            for term, count in Counter(tokens).items():
                indices.append(vocab.setdefault(term, len(vocab)))
                data.append(count)
            indptr.append(len(indices))
        tf = sparse.csr_matrix(
            (
                np.asarray(data, dtype=np.float32),
                np.asarray(indices, dtype=np.int32),
                np.asarray(indptr, dtype=np.int64),
            ),
            shape=(len(ids), len(vocab)),
        )
        matrix = (
            np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
            if ids
            else np.zeros((0, 0), dtype=np.float32)
        )
        return cls(_new_name(), ids, facets, list(vocab), tf, matrix)

    @classmethod
    def merge(cls, parts: Sequence[tuple[Segment, np.ndarray]]) -> Segment:
        """One segment of the rows of ``parts`` that each mask keeps, in order (no word is
        counted again)."""
        vocab: dict[str, int] = {}
        blocks = []
        for segment, keep in parts:
            columns = np.asarray([vocab.setdefault(t, len(vocab)) for t in segment.terms])
            blocks.append((segment.tf[keep], columns))
        tf = (
            sparse.vstack(
                [_widen(block, columns, len(vocab)) for block, columns in blocks], format="csr"
            )
            if blocks
            else sparse.csr_matrix((0, 0), dtype=np.float32)
        )
        facets = {
            name: [v for segment, keep in parts for v, k in zip(segment.facets[name], keep,
                                                                strict=True) if k]
            for name in FACETS
        }  # fmt: skip
        ids = [c for segment, keep in parts for c, k in zip(segment.chunk_ids, keep, strict=True)
               if k]  # fmt: skip
        dim = max((segment.vectors.shape[1] for segment, _ in parts), default=0)
        vectors = (
            np.concatenate([segment.vectors[keep].reshape(-1, dim) for segment, keep in parts])
            if parts
            else np.zeros((0, dim), dtype=np.float32)
        )
        return cls(_new_name(), ids, facets, list(vocab), tf.tocsr(), vectors)

    # --- on disk ------------------------------------------------------------------------------
    def save(self, root: Path) -> None:
        """Write the segment's folder (under a temporary name, then renamed: a folder that
        bears a segment's name is whole)."""
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".seg-"))
        (tmp / "ids.json").write_text(json.dumps(self.chunk_ids))
        (tmp / "rows.json").write_text(json.dumps({"facets": self.facets, "terms": self.terms}))
        sparse.save_npz(tmp / "tf.npz", self.tf, compressed=False)
        np.save(tmp / "vectors.npy", self.vectors)
        os.replace(tmp, root / self.name)

    @classmethod
    def load(cls, root: Path, name: str) -> Segment:
        """Raises OSError or ValueError when the segment is missing or damaged."""
        folder = root / name
        ids = json.loads((folder / "ids.json").read_text())
        rows = json.loads((folder / "rows.json").read_text())
        tf = sparse.load_npz(folder / "tf.npz").tocsr()
        vectors = np.load(folder / "vectors.npy")
        if not (len(ids) == tf.shape[0] == len(vectors)) or tf.shape[1] != len(rows["terms"]):
            raise ValueError(f"segment {name} does not agree with itself")
        return cls(name, ids, rows["facets"], rows["terms"], tf, vectors)

    @staticmethod
    def ids(root: Path, name: str) -> list[str]:
        """The chunk ids of a saved segment, without reading the rest."""
        return list(json.loads((root / name / "ids.json").read_text()))


def _new_name() -> str:
    return f"seg-{uuid.uuid4().hex}"


def _widen(block: sparse.csr_matrix, columns: np.ndarray, width: int) -> sparse.csr_matrix:
    """``block`` with its columns renumbered by ``columns``, in a matrix ``width`` wide."""
    indices = columns[block.indices] if len(columns) else block.indices
    return sparse.csr_matrix(
        (block.data, indices.astype(np.int32), block.indptr), shape=(block.shape[0], width)
    )


@dataclass(frozen=True)
class Part:
    """One segment of a manifest and the rows of it deleted since it was written."""

    name: str
    rows: int
    dead: frozenset[int] = frozenset()

    def keep(self) -> np.ndarray:
        mask = np.ones(self.rows, dtype=bool)
        if self.dead:
            mask[np.fromiter(self.dead, dtype=np.int64)] = False
        return mask


@dataclass(frozen=True)
class Manifest:
    """The segments of one generation of the BM25 side, in row order."""

    generation: str
    parts: tuple[Part, ...] = field(default_factory=tuple)

    @property
    def alive(self) -> int:
        return sum(p.rows - len(p.dead) for p in self.parts)

    def merging(self) -> int | None:
        """Where a merge should start (the parts from there on become one), or None when none is
        due: the segments a write added are merged into one when there are more than
        ``MAX_SEGMENTS``, and the first, large one with them only when they hold as many rows,
        or when more than ``MAX_DEAD`` of all rows are deleted ones (so a merge costs what was
        added since the last full one, most times)."""
        rows = sum(p.rows for p in self.parts)
        if rows and (rows - self.alive) / rows > MAX_DEAD:
            return 0
        if len(self.parts) <= MAX_SEGMENTS:
            return None
        tail = sum(p.rows for p in self.parts[1:])
        return 0 if tail >= self.parts[0].rows else 1

    def changed(
        self, root: Path, gone: set[str], added: Segment | None, generation: str
    ) -> Manifest:
        """This manifest with the rows of the chunk ids ``gone`` dead and ``added`` appended."""
        parts = []
        for part in self.parts:
            dead = set(part.dead)
            if gone:
                ids = Segment.ids(root, part.name)
                dead.update(i for i, cid in enumerate(ids) if cid in gone)
            parts.append(Part(part.name, part.rows, frozenset(dead)))
        if added is not None and len(added):
            parts.append(Part(added.name, len(added)))
        return Manifest(generation, tuple(parts))

    # --- on disk ------------------------------------------------------------------------------
    def save(self, root: Path) -> None:
        """Write the manifest, switch CURRENT to it, then remove what neither it nor the
        manifest it replaces names (a reader still loading the previous one finds it whole)."""
        root.mkdir(parents=True, exist_ok=True)
        previous = Manifest.load(root, any_layout=True)
        name = f"gen-{self.generation}-{uuid.uuid4().hex[:8]}"
        body = {
            "generation": self.generation,
            "layout": layout(),
            "segments": [
                {"name": p.name, "rows": p.rows, "dead": sorted(p.dead)} for p in self.parts
            ],
        }
        _write_atomic(root / f"{name}.json", json.dumps(body))
        _write_atomic(root / "CURRENT", name)
        keep = {f"{name}.json", "CURRENT"} | {p.name for p in self.parts}
        if previous is not None:
            keep |= {f"{previous[1]}.json"} | {p.name for p in previous[0].parts}
        recent = time.time() - 60  # what another writer may be about to name
        for path in root.iterdir():
            if path.name not in keep and _mtime(path) < recent:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)

    @staticmethod
    def current(root: Path) -> str | None:
        """The current manifest's name (None when there is none)."""
        try:
            name = (root / "CURRENT").read_text().strip()
        except OSError:
            return None
        return name if name.startswith("gen-") else None

    @classmethod
    def load(cls, root: Path, any_layout: bool = False) -> tuple[Manifest, str] | None:
        """The current manifest and its name; None when there is none, it is damaged or it
        has another layout (unless ``any_layout``)."""
        name = cls.current(root)
        if name is None:
            return None
        try:
            body = json.loads((root / f"{name}.json").read_text())
            if not any_layout and body.get("layout") != layout():
                return None
            parts = tuple(
                Part(str(s["name"]), int(s["rows"]), frozenset(int(r) for r in s["dead"]))
                for s in body["segments"]
            )
            return cls(str(body["generation"]), parts), name
        except (OSError, ValueError, KeyError, TypeError):
            return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)

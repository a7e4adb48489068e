"""The index: a Chroma collection (embedded or on a server) plus a BM25 index derived from it.

Chroma is the source of truth. The BM25 index is a cache keyed by the collection's
``aqa_generation`` marker, which every write session changes first: a BM25 index whose
generation differs is stale and is rebuilt from Chroma, so the two sides always agree, even
after an interrupted ingest or on another machine reading the same Chroma server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import bm25s
import chromadb
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from app.errors import ConfigError, IndexMismatchError
from app.models import Chunk, IndexStats, Paper
from app.settings import Settings
from ingest.embed import ModelSpec
from ingest.text import author_keys, fingerprint, has_latex, plain_text

MODEL_KEY = "aqa_embedding_model"
DIM_KEY = "aqa_embedding_dim"
GENERATION_KEY = "aqa_generation"
_PAGE = 5000


def open_client(settings: Settings) -> ClientAPI:
    """Embedded Chroma under data_dir, or the Chroma server named by AQA_CHROMA_HOST."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_host:
        try:
            return chromadb.HttpClient(
                host=settings.chroma_host,
                port=settings.chroma_port,
                ssl=settings.chroma_ssl,
                settings=chroma_settings,
            )
        except Exception as exc:
            raise ConfigError(
                f"Cannot reach the Chroma server at {settings.chroma_host}:{settings.chroma_port} "
                f"({exc}). Start it with `chroma run --path DIR --port {settings.chroma_port}` "
                "or unset AQA_CHROMA_HOST to use the embedded index."
            ) from exc
    settings.chroma_dir.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_dir), settings=chroma_settings)


def paper_hash(paper: Paper, chunking: str) -> str:
    """Changes when anything that shapes a paper's chunks changes: its record or the chunking."""
    return fingerprint(paper.model_dump_json(exclude={"source"}), chunking)


def chunk_metadata(paper: Paper, chunk: Chunk, n_chunks: int, chunking: str) -> dict[str, Any]:
    """What Chroma stores beside a chunk (no None values: Chroma rejects them)."""
    meta: dict[str, Any] = {
        "paper_id": paper.paper_id,
        "chunk_index": chunk.index,
        "start": chunk.start,
        "end": chunk.end,
        "title": paper.title,
        "title_derived": paper.title_derived,
        "authors": json.dumps(paper.authors, ensure_ascii=False),
        "keywords": json.dumps(paper.keywords, ensure_ascii=False),
        "source": paper.source,
        "content_hash": chunk.content_hash,
    }
    # LaTeX rendering is slow (pylatexenc, ~20 ms an abstract): done once here, not per query
    if has_latex(chunk.text):
        meta["plain"] = chunk.plain
    if has_latex(paper.title):
        meta["plain_title"] = plain_text(paper.title)
    for key in ("year", "venue", "url", "decision"):
        value = getattr(paper, key)
        if value is not None:
            meta[key] = value
    # lower-case copies for case-insensitive filters
    if paper.venue:
        meta["venue_key"] = paper.venue.casefold()
    if paper.decision:
        meta["decision_key"] = paper.decision.casefold()
    # on the first chunk: lets a re-ingest skip an unchanged paper without chunking it again
    if chunk.index == 0:
        meta["paper_hash"] = paper_hash(paper, chunking)
        meta["n_chunks"] = n_chunks
    meta["meta_hash"] = fingerprint(json.dumps({k: meta[k] for k in sorted(meta) if k != "source"}))
    return meta


def plain_document(meta: dict[str, Any], document: str) -> str:
    """A stored chunk's text as displayed and searched (rendered at ingest when it had LaTeX)."""
    return str(meta["plain"]) if "plain" in meta else plain_text(document)


def plain_title(meta: dict[str, Any], default: str = "") -> str:
    if "plain_title" in meta:
        return str(meta["plain_title"])
    return plain_text(str(meta.get("title", default)))


@dataclass(frozen=True)
class Stored:
    """A chunk as the index holds it."""

    chunk_id: str
    paper_id: str
    content_hash: str
    meta_hash: str
    paper_hash: str = ""
    n_chunks: int = 0


class Index:
    """One collection and its BM25 companion."""

    def __init__(self, settings: Settings, client: ClientAPI | None = None) -> None:
        self.settings = settings
        self.client = client or open_client(settings)
        self.batch_size = self.client.get_max_batch_size()

    # --- collection --------------------------------------------------------------------------
    def collection(self, spec: ModelSpec | None = None, create: bool = False) -> Collection | None:
        """The collection; with ``spec``, refuse one built by another model."""
        name = self.settings.collection
        if create:
            if spec is None:
                raise ValueError("creating a collection needs the model spec")
            col = self.client.get_or_create_collection(
                name,
                metadata={MODEL_KEY: spec.name, DIM_KEY: spec.dim, GENERATION_KEY: "new"},
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=None,
            )
        else:
            try:
                col = self.client.get_collection(name, embedding_function=None)
            except Exception:  # chroma raises NotFoundError / ValueError by version
                return None
        if spec is not None:
            self.check_model(col, spec)
        return col

    def check_model(self, col: Collection, spec: ModelSpec) -> None:
        meta = col.metadata or {}
        built_with, dim = meta.get(MODEL_KEY), meta.get(DIM_KEY)
        if built_with is not None and (built_with != spec.name or dim != spec.dim):
            raise IndexMismatchError(
                f"The index in {self.where()} was built with {built_with} ({dim} dimensions) but "
                f"the settings ask for {spec.name} ({spec.dim} dimensions). Either set "
                f"AQA_EMBEDDING_MODEL/AQA_EMBEDDINGS back to match it, or rebuild it with "
                f"`abstract-qa ingest PATH --rebuild`."
            )

    def where(self) -> str:
        if self.settings.chroma_host:
            return f"Chroma server {self.settings.chroma_host}:{self.settings.chroma_port}"
        return str(self.settings.chroma_dir)

    def drop(self) -> None:
        """Delete the collection and its BM25 index (for --rebuild)."""
        if self.collection() is not None:
            self.client.delete_collection(self.settings.collection)
        shutil.rmtree(self._bm25_root(), ignore_errors=True)

    def begin_write(self, col: Collection) -> str:
        """Mark the BM25 side stale before any change: a crash mid-write then forces a rebuild."""
        generation = uuid.uuid4().hex
        meta = dict(col.metadata or {})
        meta[GENERATION_KEY] = generation
        col.modify(metadata=meta)
        return generation

    @staticmethod
    def generation(col: Collection) -> str:
        return str((col.metadata or {}).get(GENERATION_KEY, ""))

    # --- reading -----------------------------------------------------------------------------
    def scan(
        self, col: Collection, documents: bool = False, embeddings: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Every chunk's id and metadata (and text, and vector), page by page."""
        include: Any = ["metadatas"]
        include += ["documents"] if documents else []
        include += ["embeddings"] if embeddings else []
        offset = 0
        while True:
            page = col.get(include=include, limit=_PAGE, offset=offset)
            ids = page["ids"]
            if not ids:
                return
            metas = page["metadatas"] or []
            docs = page["documents"] or [""] * len(ids)
            vectors: Any = page.get("embeddings")
            vectors = vectors if vectors is not None else [None] * len(ids)
            for chunk_id, meta, doc, vector in zip(ids, metas, docs, vectors, strict=True):
                yield {"id": chunk_id, "meta": dict(meta or {}), "document": doc, "vector": vector}
            offset += len(ids)

    def stored(self, col: Collection) -> dict[str, Stored]:
        return {
            row["id"]: Stored(
                chunk_id=row["id"],
                paper_id=str(row["meta"].get("paper_id", "")),
                content_hash=str(row["meta"].get("content_hash", "")),
                meta_hash=str(row["meta"].get("meta_hash", "")),
                paper_hash=str(row["meta"].get("paper_hash", "")),
                n_chunks=int(row["meta"].get("n_chunks", 0)),
            )
            for row in self.scan(col)
        }

    # --- writing -----------------------------------------------------------------------------
    def batches(self, items: Sequence[Any]) -> Iterator[Sequence[Any]]:
        for i in range(0, len(items), self.batch_size):
            yield items[i : i + self.batch_size]

    # --- BM25 --------------------------------------------------------------------------------
    def _bm25_root(self) -> Path:
        root = self.settings.bm25_dir
        if self.settings.chroma_host:
            # One cache per server and collection, so switching servers never mixes them.
            key = f"{self.settings.chroma_host}_{self.settings.chroma_port}"
            root = root / "".join(c if c.isalnum() else "_" for c in key)
        return root / self.settings.collection

    def build_bm25(self, col: Collection, generation: str) -> BM25Index:
        """Rebuild the BM25 index from what Chroma holds now, and save it atomically."""
        ids: list[str] = []
        texts: list[str] = []
        facets: dict[str, list[Any]] = {name: [] for name in FACETS}
        vectors: list[Any] = []
        for row in self.scan(col, documents=True, embeddings=True):
            meta = row["meta"]
            ids.append(row["id"])
            title = "" if meta.get("title_derived") else plain_title(meta)
            texts.append(f"{title}. {plain_document(meta, row['document'] or '')}")
            vectors.append(row["vector"])
            for name, values in facets.items():
                values.append(meta.get(name))
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        bm25 = BM25Index.build(ids, texts, generation, facets, matrix)
        bm25.save(self._bm25_root())
        return bm25

    def saved_bm25(self) -> BM25Index | None:
        """The BM25 index on disk as it is, stale or not (None when there is none)."""
        return BM25Index.load(self._bm25_root())

    def load_bm25(self, col: Collection) -> BM25Index:
        """The BM25 index matching the collection now, rebuilt if it is missing or stale."""
        generation = self.generation(col)
        bm25 = self.saved_bm25()
        if bm25 is None or bm25.generation != generation:
            bm25 = self.build_bm25(col, generation)
        return bm25


_STEMMER = Stemmer.Stemmer("english")
# bm25s's 33 English stopwords, plus the words of questions and of abstracts in general, which
# say nothing about which paper is meant.
STOPWORDS = sorted(
    set(STOPWORDS_EN)
    | set(
        [
            "what",
            "which",
            "how",
            "why",
            "who",
            "whom",
            "whose",
            "when",
            "where",
            "does",
            "do",
            "did",
            "can",
            "could",
            "would",
            "should",
            "may",
            "might",
            "about",
            "any",
            "some",
            "there",
            "their",
            "them",
            "its",
            "it's",
            "i",
            "we",
            "our",
            "us",
            "you",
            "your",
            "me",
            "my",
            "he",
            "she",
            "his",
            "her",
            "paper",
            "papers",
            "work",
            "works",
            "study",
            "studies",
            "propose",
            "proposed",
            "show",
            "shows",
            "tell",
            "using",
            "use",
            "used",
            "also",
            "than",
            "more",
            "most",
            "other",
            "such",
            "only",
            "very",
            "been",
            "being",
            "has",
            "have",
            "had",
            "were",
            "was",
        ]
    )
)
TOKENIZER_VERSION = "5"  # bump when tokenisation or the saved layout changes: indexes are rebuilt
# British spellings match American ones: "generalise" finds "generalizes", "behaviour" "behavior"
_ISE = re.compile(r"(?<=[a-z]{3})([iy])s(e|es|ed|ing|ation|ations|er|ers)\b")
_OUR = re.compile(r"(?<=[a-z]{3})our(s?)\b")


def _american(text: str) -> str:
    return _OUR.sub(r"or\1", _ISE.sub(r"\1z\2", text.lower()))


def bm25_tokens(texts: list[str]) -> list[list[str]]:
    tokenized = bm25s.tokenize(
        [_american(t) for t in texts],
        lower=True,
        stopwords=STOPWORDS,
        stemmer=_STEMMER,
        return_ids=False,
        show_progress=False,
    )
    return [list(tokens) for tokens in tokenized]


FACETS = ("paper_id", "year", "venue", "decision", "authors")
"""Chunk metadata the BM25 side keeps, so filters apply to it without asking Chroma."""


@dataclass
class BM25Index:
    """BM25 over every chunk, plus the per-chunk facts a query needs without asking Chroma:
    facets for filters and the chunk vectors (row ``i`` is ``chunk_ids[i]``), so a chunk that
    only BM25 found gets its dense similarity locally."""

    retriever: bm25s.BM25
    chunk_ids: list[str]
    generation: str
    facets: dict[str, list[Any]]
    vectors: np.ndarray

    @classmethod
    def build(
        cls,
        chunk_ids: list[str],
        texts: list[str],
        generation: str,
        facets: dict[str, list[Any]],
        vectors: np.ndarray,
    ) -> BM25Index:
        retriever = bm25s.BM25()
        if texts:
            retriever.index(bm25_tokens(texts), show_progress=False)
        return cls(retriever, chunk_ids, generation, facets, vectors)

    @cached_property
    def facet_arrays(self) -> dict[str, np.ndarray]:
        """The facets as arrays, the form `Filters.mask` takes."""
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
    def author_rows(self) -> dict[str, np.ndarray]:
        """Rows of the chunks of each author key ("levine", "s levine"): the author filter is
        a union of these, as fast as the other facets."""
        rows: dict[str, list[int]] = {}
        for i, raw in enumerate(self.facets.get("authors") or []):
            for name in author_list(raw):
                for key in author_keys(name):
                    rows.setdefault(key, []).append(i)
        return {key: np.unique(np.asarray(r, dtype=np.int64)) for key, r in rows.items()}

    @cached_property
    def author_names(self) -> list[str]:
        """Every author as written in the corpus, most papers first (for the app's search)."""
        counts: Counter[str] = Counter()
        seen: set[tuple[str, str]] = set()
        for raw, paper in zip(
            self.facets.get("authors") or [], self.facets["paper_id"], strict=False
        ):
            for name in author_list(raw):
                if (name, str(paper)) not in seen:
                    seen.add((name, str(paper)))
                    counts[name] += 1
        return [name for name, _ in counts.most_common()]

    @cached_property
    def centroid(self) -> np.ndarray:
        """The unit mean of the chunk vectors: what a typical question of this corpus is near."""
        if not len(self.vectors):
            return np.zeros(0, dtype=np.float32)
        mean = self.vectors.mean(axis=0)
        return np.asarray(mean / (np.linalg.norm(mean) or 1.0), dtype=np.float32)

    @cached_property
    def position(self) -> dict[str, int]:
        """Row of each chunk id in the BM25 arrays."""
        return {cid: i for i, cid in enumerate(self.chunk_ids)}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for ``query`` (zeros when no query word is indexed)."""
        vocab = self.retriever.vocab_dict or {}
        tokens = [t for t in bm25_tokens([query])[0] if t in vocab]
        if not tokens or not self.chunk_ids:
            return np.zeros(len(self.chunk_ids), dtype=np.float32)
        return np.asarray(self.retriever.get_scores(tokens), dtype=np.float32)

    def holding_all(self, query: str) -> np.ndarray:
        """Which chunks hold every (stemmed, non-stopword) word of ``query``."""
        tokens = sorted(set(bm25_tokens([query])[0]) - {""})
        vocab = self.retriever.vocab_dict or {}
        scores: Any = self.retriever.scores or {}
        indptr, indices = scores.get("indptr"), scores.get("indices")
        keep = np.ones(len(self.chunk_ids), dtype=bool) if tokens else np.zeros(0, dtype=bool)
        for token in tokens:
            has = np.zeros(len(self.chunk_ids), dtype=bool)
            if token in vocab and indptr is not None and indices is not None:
                tid = vocab[token]
                has[indices[indptr[tid] : indptr[tid + 1]]] = True
            keep &= has
        return keep if tokens else np.zeros(len(self.chunk_ids), dtype=bool)

    def unseen(self, words: list[str]) -> list[str]:
        """The words no indexed chunk contains (compared as BM25 tokens: case and stem)."""
        vocab = self.retriever.vocab_dict or {}
        return [
            word
            for word, tokens in zip(words, bm25_tokens(words), strict=True)
            if tokens and not any(t in vocab for t in tokens)
        ]

    def coverage(self, query: str, texts: list[str]) -> list[float]:
        """For each text, the share of the query's word weight (idf) that it contains.

        A word the index has never seen weighs the most, so a question about something absent
        from the corpus scores low even when its common words match."""
        terms = set(bm25_tokens([query])[0]) - {""}
        if not terms:
            return [0.0] * len(texts)
        vocab = self.retriever.vocab_dict or {}
        scores: Any = self.retriever.scores or {}
        n = float(scores.get("num_docs", len(self.chunk_ids)) or 1)
        indptr = scores.get("indptr")
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
            sum(w for t, w in weight.items() if t in set(toks)) / total
            for toks in bm25_tokens(texts)
        ]

    def save(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        target = root / f"gen-{self.generation}-{uuid.uuid4().hex[:8]}"
        if self.chunk_ids:
            self.retriever.save(str(target))
        target.mkdir(parents=True, exist_ok=True)
        np.save(target / "vectors.npy", self.vectors)
        (target / "aqa.json").write_text(
            json.dumps(
                {
                    "generation": self.generation,
                    "tokenizer": TOKENIZER_VERSION,
                    "chunk_ids": self.chunk_ids,
                    "facets": self.facets,
                }
            )
        )
        fd, tmp = tempfile.mkstemp(dir=root, prefix=".current-")
        with os.fdopen(fd, "w") as fh:
            fh.write(target.name)
        os.replace(tmp, root / "CURRENT")
        for old in root.glob("gen-*"):
            if old.name != target.name:
                shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, root: Path) -> BM25Index | None:
        try:
            target = root / (root / "CURRENT").read_text().strip()
            info = json.loads((target / "aqa.json").read_text())
            if info.get("tokenizer") != TOKENIZER_VERSION:
                return None
            retriever = (
                bm25s.BM25.load(str(target), mmap=False) if info["chunk_ids"] else bm25s.BM25()
            )
            vectors = np.load(target / "vectors.npy")
        except (OSError, ValueError, KeyError):
            return None
        if len(vectors) != len(info["chunk_ids"]):
            return None
        return cls(
            retriever, list(info["chunk_ids"]), str(info["generation"]), info["facets"], vectors
        )


def author_list(raw: Any) -> list[str]:
    """Authors as Chroma stores them (a JSON list in a string)."""
    if not isinstance(raw, str) or not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def index_stats(settings: Settings) -> IndexStats:
    """Papers, chunks, venues and years in the index; the model that built it."""
    index = Index(settings)
    col = index.collection()
    chroma = (
        f"{settings.chroma_host}:{settings.chroma_port}" if settings.chroma_host else "embedded"
    )
    papers: dict[str, dict[str, Any]] = {}
    chunks = 0
    meta: dict[str, Any] = {}
    if col is not None:
        meta = dict(col.metadata or {})
        for row in index.scan(col):
            chunks += 1
            papers.setdefault(str(row["meta"].get("paper_id")), row["meta"])
    venues = Counter(str(m.get("venue", "unknown")) for m in papers.values())
    years = Counter(str(m.get("year", "unknown")) for m in papers.values())
    return IndexStats(
        papers=len(papers),
        chunks=chunks,
        venues=dict(venues.most_common()),
        years=dict(sorted(years.items())),
        embedding_model=meta.get(MODEL_KEY),
        embedding_dim=meta.get(DIM_KEY),
        data_dir=settings.data_dir,
        chroma=chroma,
    )

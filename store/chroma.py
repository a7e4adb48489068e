"""The Chroma side of the store: the client (embedded or a server) and the collection of chunks.

Chroma is the source of truth; this is the only module that imports chromadb. Everything it
returns is ours: `StoredChunk` records, ids, similarities.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import chromadb
import httpx
import numpy as np
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import NotFoundError

from core.errors import ConfigError, IndexMismatchError, StoreUnreachableError
from core.models import Filters, ModelSpec
from core.settings import Settings
from store.records import IDENTITY_KINDS, IDENTITY_LAYOUT, StoredChunk, identity_metadata

MODEL_KEY = "aqa_embedding_model"
DIM_KEY = "aqa_embedding_dim"
GENERATION_KEY = "aqa_generation"
IDENTITY_KEY = "aqa_identity"  # the `IDENTITY_LAYOUT` every paper's first chunk is labelled with
_PAGE = 5000
_PAPERS_PER_GET = 500  # paper ids in one `$in` filter


P = ParamSpec("P")
R = TypeVar("R")


def unreachable(host: str, port: int, reason: object) -> StoreUnreachableError:
    return StoreUnreachableError(
        f"Cannot reach the Chroma server at {host}:{port} ({reason}). Start it with "
        f"`chroma run --path DIR --port {port}`, check AQA_CHROMA_HOST and AQA_CHROMA_PORT, "
        "or unset AQA_CHROMA_HOST to use the embedded index."
    )


@contextmanager
def reaching(client: ClientAPI) -> Iterator[None]:
    """A Chroma server that stops answering is told as such, never as "no collection"."""
    try:
        yield
    except httpx.TransportError as exc:
        host, port = address(client)
        raise unreachable(host, port, exc) from exc


def address(client: ClientAPI) -> tuple[str, int]:
    """The host and port of a server's client (set by `open_client`)."""
    return getattr(client, "aqa_address", ("?", 0))


def _reached(method: Callable[P, R]) -> Callable[P, R]:
    """`reaching` around a `ChunkCollection` method."""

    @functools.wraps(method)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        collection: ChunkCollection = args[0]  # type: ignore[assignment]
        with reaching(collection.client):
            return method(*args, **kwargs)

    return guarded


def open_client(settings: Settings) -> ClientAPI:
    """Embedded Chroma under data_dir, or the Chroma server named by AQA_CHROMA_HOST."""
    chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if settings.chroma_host:
        try:
            client = chromadb.HttpClient(
                host=settings.chroma_host,
                port=settings.chroma_port,
                ssl=settings.chroma_ssl,
                headers=auth_headers(settings),
                settings=chroma_settings,
            )
        except Exception as exc:
            if any(code in str(exc) for code in ("401", "403", "nauthori", "orbidden")):
                raise ConfigError(
                    f"The Chroma server at {settings.chroma_host}:{settings.chroma_port} refused "
                    f"the request: set AQA_CHROMA_TOKEN to its token (sent in the "
                    f"{settings.chroma_auth_header} header; AQA_CHROMA_AUTH_HEADER changes it)."
                ) from None
            raise unreachable(settings.chroma_host, settings.chroma_port, exc) from exc
        client.aqa_address = (settings.chroma_host, settings.chroma_port)  # type: ignore[attr-defined]
        return client
    settings.chroma_dir.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(settings.chroma_dir), settings=chroma_settings)


def auth_headers(settings: Settings) -> dict[str, str]:
    """The header that carries the Chroma token, when one is set."""
    if settings.chroma_token is None:
        return {}
    token = settings.chroma_token.get_secret_value()
    header = settings.chroma_auth_header
    return {header: f"Bearer {token}" if header.casefold() == "authorization" else token}


def where(filters: Filters) -> dict[str, Any] | None:
    """The filters as Chroma's ``where`` (authors cannot be: Chroma has no list metadata)."""
    clauses: list[dict[str, Any]] = []
    if filters.year_from is not None:
        clauses.append({"year": {"$gte": filters.year_from}})
    if filters.year_to is not None:
        clauses.append({"year": {"$lte": filters.year_to}})
    if filters.venues:
        clauses.append({"venue_key": {"$in": [v.casefold() for v in filters.venues]}})
    if filters.decisions:
        clauses.append({"decision_key": {"$in": [d.casefold() for d in filters.decisions]}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class ChunkCollection:
    """One Chroma collection of chunks, as records."""

    def __init__(self, collection: Collection, batch_size: int, client: ClientAPI) -> None:
        self._col = collection
        self.batch_size = batch_size
        self.client = client

    # --- the collection's own metadata: model and write generation ---------------------------
    @property
    def model(self) -> tuple[str | None, int | None]:
        meta = self._col.metadata or {}
        name, dim = meta.get(MODEL_KEY), meta.get(DIM_KEY)
        return (None if name is None else str(name)), (None if dim is None else int(dim))

    def check_model(self, spec: ModelSpec, where: str) -> None:
        """Refuse an index built by another embedding model than ``spec``."""
        built_with, dim = self.model
        if built_with is not None and (built_with != spec.name or dim != spec.dim):
            raise IndexMismatchError(
                f"The index in {where} was built with {built_with} ({dim} dimensions) but "
                f"the settings ask for {spec.name} ({spec.dim} dimensions). Either set "
                f"AQA_EMBEDDING_MODEL/AQA_EMBEDDINGS back to match it, or rebuild it with "
                f"`abstract-qa ingest PATH --rebuild`."
            )

    @property
    def generation(self) -> str:
        """Changes first in every write session (see `store.index`)."""
        return str((self._col.metadata or {}).get(GENERATION_KEY, ""))

    @_reached
    def set_generation(self, generation: str) -> None:
        self._set(GENERATION_KEY, generation)

    @property
    def identified(self) -> bool:
        """Whether every paper's first chunk carries its identity keys in today's forms (a
        collection written before they were stored has not: see `identify`)."""
        return self._metadata_now().get(IDENTITY_KEY) == IDENTITY_LAYOUT

    def generation_now(self) -> str:
        """`generation` as the collection has it now, not as it was when this was opened."""
        return str(self._metadata_now().get(GENERATION_KEY, ""))

    @_reached
    def _metadata_now(self) -> dict[str, Any]:
        col = self.client.get_collection(self._col.name, embedding_function=None)
        return dict(col.metadata or {})

    def _set(self, key: str, value: str) -> None:
        """One key of the collection's metadata (`modify` replaces it all: the rest is read
        just before, so what another process set since this was opened is kept)."""
        meta = self._metadata_now()
        meta[key] = value
        self._col.modify(metadata=meta)

    # --- reading -----------------------------------------------------------------------------
    @_reached
    def count(self) -> int:
        return self._col.count()

    def scan(
        self, documents: bool = False, vectors: bool = False
    ) -> Iterator[tuple[StoredChunk, np.ndarray | None]]:
        """Every chunk (with its text when ``documents``) and its vector (when ``vectors``),
        page by page."""
        include: Any = ["metadatas"]
        include += ["documents"] if documents else []
        include += ["embeddings"] if vectors else []
        offset = 0
        while True:
            with reaching(self.client):
                page = self._col.get(include=include, limit=_PAGE, offset=offset)
            ids = page["ids"]
            if not ids:
                return
            none: list[Any] = [None] * len(ids)
            metas: list[Any] = list(page["metadatas"] or none)
            docs: list[Any] = list(page["documents"] or none)
            embeddings: Any = page.get("embeddings")
            embeddings = embeddings if embeddings is not None else [None] * len(ids)
            for cid, meta, doc, vector in zip(ids, metas, docs, embeddings, strict=True):
                record = StoredChunk.from_store(cid, doc, dict(meta or {}))
                yield record, (None if vector is None else np.asarray(vector, dtype=np.float32))
            offset += len(ids)

    @_reached
    def get(self, ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The chunks with these ids that exist, text included, by id."""
        if not ids:
            return {}
        got = self._col.get(ids=list(ids), include=["metadatas", "documents"])
        return {
            cid: StoredChunk.from_store(cid, doc, dict(meta or {}))
            for cid, doc, meta in zip(
                got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
            )
        }

    @_reached
    def with_vectors(self, ids: Sequence[str]) -> list[tuple[StoredChunk, np.ndarray]]:
        """The chunks with these ids that exist, text included, and their vectors, in the
        order of ``ids``."""
        found: dict[str, tuple[StoredChunk, np.ndarray]] = {}
        for part in self._batches(list(ids)):
            got = self._col.get(ids=list(part), include=["metadatas", "documents", "embeddings"])
            embeddings: Any = got.get("embeddings")
            for cid, doc, meta, vector in zip(
                got["ids"],
                got["documents"] or [],
                got["metadatas"] or [],
                embeddings,
                strict=True,
            ):
                record = StoredChunk.from_store(cid, doc, dict(meta or {}))
                found[cid] = (record, np.asarray(vector, dtype=np.float32))
        return [found[cid] for cid in ids if cid in found]

    @_reached
    def of_papers(self, paper_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The chunks of these papers (records without their text), by id: what a re-ingest of
        them compares, found through the paper id's metadata index, not a scan."""
        found: dict[str, StoredChunk] = {}
        unique = list(dict.fromkeys(paper_ids))
        for start in range(0, len(unique), _PAPERS_PER_GET):
            these: dict[str, Any] = {"paper_id": {"$in": unique[start : start + _PAPERS_PER_GET]}}
            got = self._col.get(where=these, include=["metadatas"])
            for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                found[cid] = StoredChunk.from_store(cid, None, dict(meta or {}))
        return found

    @_reached
    def same_as(self, keys: Sequence[str]) -> list[StoredChunk]:
        """The first chunks (records without their text) of the papers holding any of these
        identity keys (``doi:...``, ``arxiv:...``, ``title:...``), through Chroma's metadata
        index, in the collection's order."""
        wanted: list[tuple[str, str]] = []
        for key in dict.fromkeys(keys):
            kind, _, value = key.partition(":")
            if kind in IDENTITY_KINDS and value:
                wanted.append((IDENTITY_KINDS[kind], value))
        found: dict[str, StoredChunk] = {}
        for start in range(0, len(wanted), _PAPERS_PER_GET):
            by_key: dict[str, list[str]] = {}
            for field, value in wanted[start : start + _PAPERS_PER_GET]:
                by_key.setdefault(field, []).append(value)
            clauses: list[dict[str, Any]] = [{k: {"$in": v}} for k, v in by_key.items()]
            these: Any = clauses[0] if len(clauses) == 1 else {"$or": clauses}
            got = self._col.get(where=these, include=["metadatas"])
            for cid, meta in zip(got["ids"], got["metadatas"] or [], strict=True):
                found[cid] = StoredChunk.from_store(cid, None, dict(meta or {}))
        return list(found.values())

    def heads(self) -> Iterator[StoredChunk]:
        """Every paper's first chunk (records without their text), from `scan`: faster than
        Chroma's ``where chunk_index = 0`` page by page (47 s against 58 s at 220k papers)."""
        return (record for record, _ in self.scan() if record.index == 0)

    @_reached
    def identify(
        self,
        identities: Sequence[tuple[str, Sequence[str]]],
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Label first chunks with their papers' identity keys (``(chunk id, keys)``; other
        metadata untouched): done once to a collection written before the keys were stored,
        then `mark_identified`. Neither the text nor anything BM25 reads changes, so this is no
        write session. ``progress(done, total)`` follows it."""
        done = 0
        for part in self._batches(identities):
            blank = dict.fromkeys(IDENTITY_KINDS.values())
            self._col.update(
                ids=[cid for cid, _ in part],
                metadatas=[{**blank, **identity_metadata(keys)} for _, keys in part],
            )
            done += len(part)
            if progress is not None:
                progress(done, len(identities))

    def mark_identified(self) -> None:
        self._set(IDENTITY_KEY, IDENTITY_LAYOUT)

    @_reached
    def of_paper(self, paper_id: str) -> list[StoredChunk]:
        """A paper's chunks, text included, in order."""
        got = self._col.get(where={"paper_id": paper_id}, include=["metadatas", "documents"])
        records = [
            StoredChunk.from_store(cid, doc, dict(meta or {}))
            for cid, doc, meta in zip(
                got["ids"], got["documents"] or [], got["metadatas"] or [], strict=True
            )
        ]
        return sorted(records, key=lambda r: r.index)

    @_reached
    def nearest(
        self, vector: np.ndarray, n: int, filters: Filters | None = None
    ) -> tuple[list[str], list[float]]:
        """Chroma's ``n`` nearest chunks (passing ``filters``): ids and cosine similarities."""
        found = self._col.query(
            query_embeddings=[vector.tolist()],
            n_results=n,
            where=where(filters) if filters is not None else None,
            include=["distances"],
        )
        distances = (found["distances"] or [[]])[0]
        return list(found["ids"][0]), [1.0 - float(d) for d in distances]

    # --- writing (only through `store.index.Write`) ------------------------------------------
    def _batches(self, items: Sequence[Any]) -> Iterator[Sequence[Any]]:
        for i in range(0, len(items), self.batch_size):
            yield items[i : i + self.batch_size]

    @_reached
    def upsert(self, records: Sequence[StoredChunk], vectors: Sequence[Sequence[float]]) -> None:
        for part in self._batches(list(zip(records, vectors, strict=True))):
            rows = [record.to_store() for record, _ in part]
            self._col.upsert(
                ids=[cid for cid, _, _ in rows],
                embeddings=np.asarray([vector for _, vector in part], dtype=np.float32),
                documents=[doc for _, doc, _ in rows],
                metadatas=[meta for _, _, meta in rows],
            )

    @_reached
    def update(self, records: Sequence[StoredChunk]) -> None:
        """New metadata for chunks whose text is unchanged."""
        for part in self._batches(records):
            rows = [record.to_store() for record in part]
            self._col.update(ids=[cid for cid, _, _ in rows], metadatas=[m for _, _, m in rows])

    @_reached
    def delete(self, ids: Sequence[str]) -> None:
        for part in self._batches(ids):
            self._col.delete(ids=list(part))


def open_collection(
    client: ClientAPI,
    name: str,
    batch_size: int,
    spec: ModelSpec | None = None,
    create: bool = False,
) -> ChunkCollection | None:
    """The collection ``name`` (created for ``spec`` when ``create``), or None if there is none."""
    if create:
        if spec is None:
            raise ValueError("creating a collection needs the model spec")
        with reaching(client):
            col = client.get_or_create_collection(
                name,
                metadata={
                    MODEL_KEY: spec.name,
                    DIM_KEY: spec.dim,
                    GENERATION_KEY: "new",
                    IDENTITY_KEY: IDENTITY_LAYOUT,  # (an existing collection keeps its own)
                },
                configuration={"hnsw": {"space": "cosine"}},
                embedding_function=None,
            )
    else:
        try:
            with reaching(client):
                col = client.get_collection(name, embedding_function=None)
        except NotFoundError:
            return None
    return ChunkCollection(col, batch_size, client)


def delete_collection(client: ClientAPI, name: str) -> None:
    try:
        with reaching(client):
            client.delete_collection(name)
    except NotFoundError:  # none to delete
        return

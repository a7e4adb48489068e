"""LangChain-native access: our retrieval as a `BaseRetriever`, our answer path as a `Runnable`.

    from langchain_core.runnables import RunnableLambda
    from app import QAService, as_retriever, as_runnable

    service = QAService()
    docs = as_retriever(service, k=3).invoke("federated learning")  # paper ids in metadata
    chain = as_runnable(service) | RunnableLambda(lambda a: [c.paper_id for c in a.citations])
    chain.invoke("What is DASHA?")

Both go through `QAService`: the same filters, relevance and citation check as `ask`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, Field, field_validator

from core.models import FILTER_KEYWORDS, Answer, Filters, Source

if TYPE_CHECKING:
    from app.engine.service import QAService


def to_document(source: Source) -> Document:
    """A source as a LangChain document: the passage, and who wrote it where, and its scores."""
    return Document(
        id=source.paper_id,
        page_content=source.text,
        metadata={
            "paper_id": source.paper_id,
            "title": source.title,
            "authors": source.authors,
            "year": source.year,
            "venue": source.venue,
            "url": source.url,
            "doi": source.doi,
            "arxiv_id": source.arxiv_id,
            "score": source.score,
            "relevance": source.relevance,
            "chunk_ids": source.chunk_ids,
        },
    )


class AbstractsRetriever(BaseRetriever):
    """The ``k`` papers for a query, best first, as `Document`s.

    ``k`` defaults to the service's ``top_k`` setting; ``options`` are the other options of
    `QAService.search`: ``filters`` (a `Filters` record) or its keywords (``year_from``,
    ``venue``, ``authors`` ...), and ``mode``. Keyword arguments of a call win over both, in
    ``invoke``, ``ainvoke``, ``batch`` and ``abatch`` alike (a call's ``filters`` record over
    every filter keyword): ``retriever.invoke("federated learning", k=3, year_from=2024)``.
    The service gets the filters as one record."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    service: Any = Field(description="The QAService that searches.")
    k: int | None = Field(
        default=None, ge=1, description="Papers per query; None: the service's top_k setting."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Filters and mode, as `QAService.search` takes them."
    )

    @field_validator("options")
    @classmethod
    def _k_is_a_field(cls, options: dict[str, Any]) -> dict[str, Any]:
        if "k" in options:
            raise ValueError("give k as the retriever's own `k`, not in `options`")
        return options

    def _search(self, query: str, given: dict[str, Any]) -> list[Document]:
        given.pop("verbose", None)  # BaseRetriever's own call option, passed on to us too
        options = with_record({**self.options, "k": self.k}, given)
        return [to_document(s) for s in self.service.search(query, **options)]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._search(query, kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        # BaseRetriever's own async fallback would drop the call's kwargs (k among them)
        return await run_in_executor(None, self._search, query, kwargs)


class AnswerRunnable(Runnable[str | dict[str, Any], Answer]):
    """The answer path as a Runnable. Input: a question, or a dict with ``question`` and any
    option of `QAService.stream` (``history``, ``k``, ``year_from``, ...). ``invoke`` and
    ``batch`` return `Answer`s; ``stream`` yields the answer text as it is written and then
    the `Answer` (its text with citations checked)."""

    def __init__(self, service: QAService, **options: Any) -> None:
        self.service, self.options = service, options

    def _split(self, value: str | dict[str, Any]) -> tuple[str, dict[str, Any]]:
        if isinstance(value, str):
            return value, with_record(self.options, {})
        given = dict(value)
        return str(given.pop("question", "")), with_record(self.options, given)

    def invoke(
        self, input: str | dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Answer:
        question, options = self._split(input)
        return self.service.ask(question, **options)

    def stream(  # type: ignore[override]
        self, input: str | dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[str | Answer]:
        question, options = self._split(input)
        yield from self.service.stream(question, **options)


def with_record(defaults: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    """A call's options over the defaults, with the filters as one `Filters` record: the call's
    ``filters`` record if it gives one; else the keywords of `ask()` (``year_from``,
    ``venue``, ...), the call's over the defaults'; else the defaults' record."""
    options = {**defaults, **call}
    keywords = {name: options.pop(name) for name in FILTER_KEYWORDS if name in options}
    record = call.get("filters")
    if record is None and (
        any(name in call for name in FILTER_KEYWORDS) or not defaults.get("filters")
    ):
        record = Filters.given(**keywords)
    options["filters"] = record if record is not None else defaults["filters"]
    return options


def as_retriever(service: QAService, k: int | None = None, **options: Any) -> AbstractsRetriever:
    """``service``'s search as a LangChain `BaseRetriever`: ``k`` papers per query (the
    ``top_k`` setting unless given), ``options`` as for `QAService.search`. A call's own ``k``
    and options win: ``retriever.invoke(query, k=3)``, ``await retriever.ainvoke(query, k=3)``."""
    return AbstractsRetriever(service=service, k=k, options=options)


def as_runnable(service: QAService, **options: Any) -> AnswerRunnable:
    """``service``'s answer path as a LangChain `Runnable` (options as for `QAService.stream`)."""
    return AnswerRunnable(service, **options)

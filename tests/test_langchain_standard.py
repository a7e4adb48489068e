"""LangChain's own standard retriever tests (langchain-tests), unchanged, over the sample index:
once for `AbstractsRetriever` built directly and once for `as_retriever(service)`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from app.engine.service import QAService
from app.fronts.langchain_adapters import AbstractsRetriever, as_retriever

# The suite's async test needs a runner. pytest-asyncio runs in strict mode here, and its mark on
# a module warns on every sync test; anyio's plugin takes the mark for coroutine tests only.
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """One event loop, asyncio's, whatever other backends are installed."""
    return "asyncio"


class OverTheSample(RetrieversIntegrationTests):
    """The suite over the shared sample index (the `sample_service` fixture)."""

    service: QAService

    @pytest.fixture(autouse=True)
    def _sample(self, sample_service: QAService) -> None:
        self.service = sample_service

    @property
    def retriever_query_example(self) -> str:
        return "federated learning"


class TestAbstractsRetriever(OverTheSample):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return AbstractsRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"service": self.service}


class TestAsRetriever(OverTheSample):
    @property
    def retriever_constructor(self) -> Callable[..., BaseRetriever]:  # type: ignore[override]
        return partial(as_retriever, self.service)  # the suite calls it with keywords only


def test_k_and_filters_given_per_call_win_sync_and_async(sample_service: QAService) -> None:
    """What the suite leaves out: a call's ``k`` in ``ainvoke``, ``batch`` and ``abatch``, beside
    the retriever's filters; a call's own filters; LangChain's ``verbose`` call option."""
    retriever = as_retriever(sample_service, k=4, year_from=2024)
    query = "federated learning"
    expected = [s.paper_id for s in sample_service.search(query, k=2, year_from=2024)]
    assert len(expected) == 2
    found = [
        retriever.invoke(query, k=2, verbose=True),
        asyncio.run(retriever.ainvoke(query, k=2)),
        *retriever.batch([query], k=2),
        *asyncio.run(retriever.abatch([query], k=2)),
    ]
    assert [[d.metadata["paper_id"] for d in docs] for docs in found] == [expected] * 4
    assert len(retriever.invoke(query)) == 4
    unfiltered = [s.paper_id for s in sample_service.search(query, k=3)]
    assert [d.metadata["paper_id"] for d in retriever.invoke(query, k=3, year_from=None)] == (
        unfiltered
    )
    with pytest.raises(ValueError, match="own `k`"):
        AbstractsRetriever(service=sample_service, options={"k": 3})


def test_the_retriever_passes_one_filters_record_merged_from_its_defaults_and_the_call(
    sample_service: QAService,
) -> None:
    """A `Filters` record as the retriever's default or a call's; keywords of a call merge over
    the retriever's keywords (both filters hold); a call's record replaces the default."""
    from core.models import Filters

    query = "federated learning"
    both = as_retriever(sample_service, k=3, venue="ICLR").invoke(query, year_from=2024)
    assert both and all(d.metadata["year"] == 2024 and d.metadata["venue"] == "ICLR" for d in both)
    by_record = as_retriever(sample_service, k=3, filters=Filters(year_from=2024))
    assert all(d.metadata["year"] == 2024 for d in by_record.invoke(query))
    expected = [s.paper_id for s in sample_service.search(query, k=3)]
    assert [d.metadata["paper_id"] for d in by_record.invoke(query, filters=Filters())] == expected

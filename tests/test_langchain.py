"""Our retrieval and answer path inside a user's own LangChain (LCEL) chain."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from app import as_retriever, as_runnable
from app.engine.service import QAService
from core.models import Answer
from core.settings import Settings
from tests.conftest import ROOT, assert_citations_real, paper_id_containing


def test_the_retriever_returns_documents_with_paper_metadata(sample_service: QAService) -> None:
    retriever = as_retriever(sample_service, k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("dynamic time warping")
    assert len(docs) == 3 and all(isinstance(d, Document) for d in docs)
    assert docs[0].metadata["paper_id"] == paper_id_containing("DecDTW") == docs[0].id
    for doc in docs:
        assert {"title", "year", "venue", "score", "relevance"} <= set(doc.metadata)
        assert doc.page_content
    expected = sample_service.search("dynamic time warping", k=3)
    assert [d.metadata["paper_id"] for d in docs] == [s.paper_id for s in expected]
    recent = as_retriever(sample_service, k=3, year_from=2024).invoke("federated learning")
    assert len(recent) == 3 and all(d.metadata["year"] == 2024 for d in recent)


def test_a_user_chain_composes_the_retriever_and_the_answer_runnable(
    sample_service: QAService,
) -> None:
    # what a LangChain user writes: a parallel step, our parts, their own formatting
    chain = RunnableParallel(
        question=RunnablePassthrough(),
        papers=as_retriever(sample_service, k=4)
        | RunnableLambda(lambda docs: [d.metadata["paper_id"] for d in docs]),
        answer=as_runnable(sample_service, k=4),
    ) | RunnableLambda(lambda out: {**out, "cited": [c.paper_id for c in out["answer"].citations]})
    result = chain.invoke("What is DASHA?")
    dasha = paper_id_containing("We develop and analyze DASHA")
    assert result["papers"][0] == dasha and result["cited"][0] == dasha
    assert isinstance(result["answer"], Answer)
    assert_citations_real(result["answer"])
    assert set(result["cited"]) <= set(result["papers"])  # cited papers are retrieved ones


def test_the_answer_runnable_invokes_batches_and_streams(sample_service: QAService) -> None:
    runnable = as_runnable(sample_service)
    questions = ["What is DASHA?", {"question": "What is DecDTW?", "k": 2}, "What do bees eat?"]
    answers = runnable.batch(questions)
    assert [a.abstained for a in answers] == [False, False, True]
    assert len(answers[1].sources) <= 2
    assert answers[0] == runnable.invoke("What is DASHA?").model_copy(
        update={"timings": answers[0].timings}
    )
    events = list(runnable.stream("What is DASHA?"))
    assert isinstance(events[-1], Answer) and all(isinstance(e, str) for e in events[:-1])
    assert events[-1].answer == answers[0].answer


def test_the_readmes_langchain_example_runs(
    sample_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```python\n(from langchain_core.runnables import .*?)```", readme, re.S)
    assert block is not None, "the README shows a LangChain example"
    monkeypatch.setenv("AQA_DATA_DIR", str(sample_settings.data_dir))
    namespace: dict[str, Any] = {}
    exec(block.group(1), namespace)  # the example as a user would paste it
    text, cited = namespace["chain"].invoke("What is DASHA?")
    assert "DASHA" in text and cited == [paper_id_containing("We develop and analyze DASHA")]
    assert len(namespace["docs"]) == 4

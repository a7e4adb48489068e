"""A name no indexed abstract mentions (issue 37): "No indexed abstract mentions Quokka-SGD.",
abstained, with the closest papers kept as sources; never another method's result. Names the
index holds in another spelling (case, hyphens, spaces) are answered. The bundled sample, real
Chroma, the real local model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.providers.wording import is_not_mentioned


@pytest.mark.parametrize(
    ("question", "name"),
    [
        ("What learning rate schedule does Quokka-SGD use for ResNet training?", "Quokka-SGD"),
        ("How many attention heads does the VelaNet architecture use?", "VelaNet"),
        ("Which robots was the OpenVLA-Mini policy evaluated on?", "OpenVLA-Mini"),
        ("What regret does the Thompson-Lynx bandit algorithm achieve?", "Thompson-Lynx"),
        # every word of it is in the index, but never together: still not mentioned
        ("What accuracy does Decentralized-DASHA reach?", "Decentralized-DASHA"),
        # one capitalised word no abstract has ever used, inside the sentence
        ("What regret bound does the Marblefin algorithm achieve?", "Marblefin"),
        ("Which datasets was the Ospreo-Q estimator tested on?", "Ospreo-Q"),
    ],
)
def test_a_name_no_abstract_mentions_is_said_so_and_abstained(
    sample_service: Any, question: str, name: str
) -> None:
    answer = sample_service.ask(question)
    assert answer.answer == f"No indexed abstract mentions {name}."
    assert is_not_mentioned(answer.answer)
    assert answer.abstained and not answer.citations
    assert answer.sources  # the closest papers, offered as related


@pytest.mark.parametrize(
    "question",
    [
        "What does DecDTW learn?",
        "What does Dec-DTW learn?",  # the index writes DecDTW
        "What does the decdtw layer compute?",
        "How does Dec SSL use unlabeled data?",  # the index writes Dec-SSL
        "What is the convergence rate of DASHA-PAGE?",
        "What does the DecDTW-based layer learn?",  # "X-based" describes: X is the name
    ],
)
def test_a_name_the_index_holds_in_another_spelling_is_answered(
    sample_service: Any, question: str
) -> None:
    answer = sample_service.ask(question)
    assert not is_not_mentioned(answer.answer), answer.answer
    assert not answer.abstained and answer.citations


def test_the_command_line_says_so_and_lists_the_related_papers(sample_settings: Any) -> None:
    from tests.test_cli import run

    question = "Which datasets does the Quokka-SGD paper use?"
    data = json.loads(
        run("ask", question, "--json", AQA_DATA_DIR=str(sample_settings.data_dir)).stdout
    )
    assert data["abstained"] is True and data["citations"] == []
    assert data["answer"] == "No indexed abstract mentions Quokka-SGD."
    shown = run("ask", question, AQA_DATA_DIR=str(sample_settings.data_dir)).stdout
    assert "Related papers (none mentions it):" in shown
    related = [s["paper_id"] for s in data["sources"][:3]]
    assert len(related) == 3 and all(f" - {paper}\n" in shown for paper in related)

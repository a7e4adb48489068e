"""Pure parts of answering: filters read from a question, citations read from a model's text,
the values an answer derives, and usage that belongs to each call."""

from __future__ import annotations

import pytest

from app.providers.base import Reply
from app.providers.wording import CANNOT_ANSWER, check_citations, is_refusal
from app.query.filters import parse_filters
from core.models import Answer, Citation, Filters, Source, Usage

VENUES = {"ICLR", "NeurIPS", "ICML"}
YEARS = set(range(2010, 2025))


@pytest.mark.parametrize(
    ("question", "expected", "rest"),
    [
        ("ICLR 2024 papers on diffusion", Filters(venues=["ICLR"], year_from=2024, year_to=2024),
         "papers on diffusion"),
        ("federated learning since 2020", Filters(year_from=2020), "federated learning"),
        ("bandits after 2020", Filters(year_from=2021), "bandits"),
        ("graphs before 2018", Filters(year_to=2017), "graphs"),
        ("work between 2015 and 2017 on GANs", Filters(year_from=2015, year_to=2017),
         "work on GANs"),
        ("nips papers on kernels", Filters(venues=["NeurIPS"]), "papers on kernels"),
        ("oral papers on transformers", Filters(decisions=["oral"]), "on transformers"),
        ("a batch size of 2048 in 2019", Filters(year_from=2019, year_to=2019),
         "a batch size of 2048"),
        ("GPT-2 and 1000 samples", Filters(), "GPT-2 and 1000 samples"),
        ("methods from 2048 onwards", Filters(), "methods from 2048 onwards"),  # no such year
    ],
)  # fmt: skip
def test_filters_read_from_the_question(question: str, expected: Filters, rest: str) -> None:
    filters, cleaned = parse_filters(question, VENUES, YEARS)
    assert filters == expected and cleaned == rest


def test_explicit_filters_win_and_a_removed_filter_is_forgotten() -> None:
    parsed, _ = parse_filters(
        "ICLR 2024 papers by Levine", VENUES, YEARS, {"levine": ["Sergey Levine"]}
    )
    merged = Filters(year_from=2020).merged_over(parsed)
    assert (merged.year_from, merged.year_to, merged.venues) == (2020, None, ["ICLR"])
    assert merged.authors == ["Levine"] and merged.from_question == ["venues", "authors"]
    less = merged.without(["authors"])
    assert less.authors == [] and less.from_question == ["venues"]
    assert less.describe() == "venue ICLR, years from 2020" and Filters().describe() == "none"


def sources(n: int) -> list[Source]:
    return [
        Source(
            marker=i,
            paper_id=f"p{i}",
            title=f"T{i}",
            text=f"Paper {i} shows result {i}.",
            score=0.5,
        )
        for i in range(1, n + 1)
    ]


@pytest.mark.parametrize(
    ("text", "kept", "invalid", "uncited"),
    [
        ("It works [1].", "It works [1].", [], []),
        ("It works [1, 2] and [2;1].", "It works [1][2] and [2][1].", [], []),
        ("It works [3].", "It works.", ["3"], ["It works."]),
        ("It works. [2] Also this.", "It works [2]. Also this.", [], ["Also this."]),
        ("Both [1][9] agree.", "Both [1] agree.", ["9"], []),
    ],
)
def test_citations_read_from_a_models_text(
    text: str, kept: str, invalid: list[str], uncited: list[str]
) -> None:
    checked = check_citations(text, sources(2))
    assert (checked.text, checked.invalid, checked.uncited) == (kept, invalid, uncited)
    assert all(c.paper_id == f"p{c.marker}" and c.supporting for c in checked.citations)


def test_the_refusal_sentence_is_one_sentinel() -> None:
    assert is_refusal(CANNOT_ANSWER) and is_refusal("Sorry, I CANNOT answer this from the "
                                                    "indexed abstracts.")  # fmt: skip
    assert not is_refusal("The abstracts answer this.")


def test_an_answer_derives_rank_filters_in_words_and_cited_sources() -> None:
    answer = Answer(
        question="q",
        standalone_question="q",
        answer="It works [2].",
        abstained=False,
        citations=[Citation(marker=2, paper_id="p2", title="T2")],
        sources=sources(3),
        filters=Filters(venues=["ICLR"], year_from=2024, year_to=2024),
        provider="extractive",
    )
    assert [s.rank for s in answer.sources] == [1, 2, 3]
    assert [s.paper_id for s in answer.cited_sources] == ["p2"]
    dumped = answer.model_dump(mode="json")
    assert dumped["filters_applied"] == "venue ICLR, year 2024"
    assert dumped["sources"][0]["rank"] == 1
    assert Answer.model_validate(dumped) == answer  # what the CLI prints reads back


def test_usage_belongs_to_each_call() -> None:
    first = Reply(["It ", Usage(prompt_tokens=10, completion_tokens=2), "works.", ""])
    second = Reply(["No usage reported."])
    assert first.text() == "It works." and second.text() == "No usage reported."
    assert first.usage == Usage(prompt_tokens=10, completion_tokens=2) and second.usage is None
    assert Usage.total(None, first.usage, Usage(prompt_tokens=1)) == Usage(
        prompt_tokens=11, completion_tokens=2
    )
    assert Usage.total(None, None) is None

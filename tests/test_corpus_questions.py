"""Researchers' questions over a corpus with metadata: years only where a year is meant, authors
as people write them, counts equal to a direct count, and related papers. Real Chroma, the real
local model, a corpus of 48 papers made here with known authors, years, venues and keywords."""

from __future__ import annotations

import json
import random
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.engine.service import QAService
from app.query.filters import parse_filters
from core.errors import InputError
from core.text import same_author
from tests.conftest import EXE, make_settings, start_app

TOPICS = [
    ("kernel two-sample tests", "We study kernel two-sample tests with maximum mean discrepancy."),
    ("offline reinforcement learning", "We study offline reinforcement learning from logged data."),
    ("graph neural networks", "We study message passing in graph neural networks on molecules."),
    ("causal discovery", "We study causal discovery of directed acyclic graphs from data."),
]
AUTHORS = ["Bernhard Schölkopf", "Sergey Levine", "Mihaela van der Schaar", "Ada Lovelace"]
KEYWORD = "zorbulation"  # in no other abstract: the papers that hold it are known


def make_corpus() -> list[dict[str, Any]]:
    rng = random.Random(5)
    records = []
    for i in range(48):
        title, opening = TOPICS[i % len(TOPICS)]
        year = 2015 + i % 7
        extra = f" The method relies on {KEYWORD} of the features." if i % 8 == 3 else ""
        records.append(
            {
                "id": f"p{i:02d}",
                "title": f"{title.title()} part {i}",
                "abstract": f"{opening} Our variant number {i} uses "
                f"{rng.choice(['sparse', 'deep', 'fast', 'robust'])} estimators and is evaluated "
                f"on {rng.choice(['images', 'text', 'robots', 'graphs'])}.{extra}",
                "authors": [AUTHORS[i % 4], f"Coauthor {i}"],
                "year": year,
                "venue": "ICML" if i % 2 else "NeurIPS",
                "decision": "Oral" if i % 5 == 0 else "Poster",
            }
        )  # fmt: skip
    return records


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[QAService, list[dict[str, Any]]]:
    from ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("meta-corpus")
    records = make_corpus()
    path = root / "papers.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    settings = make_settings(data_dir=root / "index")
    ingest([path], settings)
    return QAService(settings), records


YEARS = set(range(2015, 2022))


@pytest.mark.parametrize(
    ("question", "described"),
    [
        ("How does accuracy change with a batch size of 2048?", "none"),
        ("What do papers say about GPT-2 and 2019 style language models?", "none"),
        ("Top-5 accuracy with 1000 samples", "none"),
        ("Which ICML paper from 2017 studies kernels?", "venue ICML, year 2017"),
        ("a paper from 2017 on bandits", "year 2017"),
        ("What was published in 2019 on graphs?", "year 2019"),
        ("2019 papers on transformers", "year 2019"),
        ("work on graphs since 2016", "years from 2016"),
        ("between 2015 and 2017, what about kernels?", "years 2015 to 2017"),
        ("kernels before 2018", "years up to 2017"),
        ("ICML 2020 papers on causality", "venue ICML, year 2020"),
        ("papers from 2030 on kernels", "none"),  # no paper of 2030 in the index
        ("in 2048, kernels", "none"),
    ],
)
def test_years_only_where_a_year_is_meant(question: str, described: str) -> None:
    filters, _ = parse_filters(question, {"ICML", "NeurIPS"}, YEARS)
    assert filters.describe() == described


@pytest.mark.parametrize("typed", ["Schölkopf", "Scholkopf", "B. Schölkopf", "bernhard scholkopf"])
def test_author_names_match_as_people_write_them(typed: str) -> None:
    assert same_author(typed, "Bernhard Schölkopf")
    assert not same_author(typed, "Bernhard Smith")
    assert not same_author(typed, "Anna Schölkopf-Other")


@pytest.mark.parametrize(
    ("typed", "indexed", "same"),
    [
        # a full first name is not matched by another first name of the same initial
        ("Furong Huang", "Feihu Huang", False),
        ("Chun-Liang Li", "Chengtao Li", False),
        ("Chun-Liang Li", "Chunyuan Li", False),
        ("Graham W. Taylor", "Gavin Taylor", False),
        ("Dawn Song", "Dogyoon Song", False),
        # ... but by itself, its initial, a name it is a prefix of, whatever the middle names
        ("Furong Huang", "Furong Huang", True),
        ("Greg Diamos", "Gregory Diamos", True),
        ("Gregory Diamos", "Greg Diamos", True),
        ("Alexandros G. Dimakis", "Alexandros G Dimakis", True),
        ("Michael Mahoney", "Michael W. Mahoney", True),
        ("Michael W. Mahoney", "Michael Mahoney", True),
        ("M. Mahoney", "Michael W. Mahoney", True),
        ("Chun-Liang Li", "C.-L. Li", True),
        ("Chun-Liang Li", "Chunliang Li", True),
        ("chun-liang li", "Chun-Liang Li", True),
        ("Dawn Song", "Dawn Xiaodong Song", True),
        ("Sébastien Bubeck", "Sebastien Bubeck", True),
        ("Nando de Freitas", "Nando De Freitas", True),
        ("Li", "Chengtao Li", True),  # a surname alone matches everyone of that surname
        ("van der Maaten", "Laurens van der Maaten", True),
        ("L. van der Maaten", "Laurens van der Maaten", True),
        ("Ulrike von Luxburg", "U. von Luxburg", True),
        ("V. Vu", "Van H. Vu", True),  # "Van" a given name, not a particle
        ("H. Vu", "Van H. Vu", False),
    ],
)
def test_a_full_first_name_matches_only_compatible_first_names(
    typed: str, indexed: str, same: bool
) -> None:
    assert same_author(typed, indexed) is same


def test_the_author_filter_keeps_only_that_authors_papers(corpus: Any) -> None:
    service, records = corpus
    answer = service.ask("kernel two-sample tests", authors=["B. Scholkopf"], k=10)
    assert answer.filters_applied == "author B. Scholkopf"
    assert answer.sources and all("Bernhard Schölkopf" in s.authors for s in answer.sources)
    mine = {r["id"] for r in records if "Bernhard Schölkopf" in r["authors"]}
    assert {s.paper_id for s in answer.sources} <= mine
    assert len(answer.sources) == 10


@pytest.mark.parametrize(
    "question",
    [
        "Which papers by Sergey Levine study offline reinforcement learning?",
        "Levine et al. on offline reinforcement learning",
        "Sergey Levine's work on offline reinforcement learning",
    ],
)
def test_an_author_is_read_from_the_question(corpus: Any, question: str) -> None:
    service, _ = corpus
    answer = service.ask(question)
    assert "authors" in answer.filters.from_question
    assert answer.sources and all("Sergey Levine" in s.authors for s in answer.sources)
    # the filter can be removed, as the app's button does
    free = service.ask(question, ignore=["authors"])
    assert "authors" not in free.filters.from_question and free.filters.authors == []


def test_a_name_that_is_no_author_is_no_filter(corpus: Any) -> None:
    service, _ = corpus
    answer = service.ask("Which papers by Grace Hopper study causal discovery?")
    assert answer.filters.authors == []


def test_counts_equal_a_direct_count_over_the_index(corpus: Any) -> None:
    service, records = corpus
    answer = service.ask(f"How has work on {KEYWORD} grown over the years?")
    holding = [r for r in records if KEYWORD in r["abstract"]]
    assert answer.counts is not None and answer.counts.papers == len(holding) == 6
    assert answer.counts.by_year == {
        str(y): n for y, n in sorted(Counter(r["year"] for r in holding).items())
    }
    assert answer.counts.by_venue == dict(Counter(r["venue"] for r in holding).most_common())
    assert KEYWORD in answer.counts.rule and "0.55" in answer.counts.rule
    assert not answer.abstained and answer.citations and answer.uncited_sentences == []
    assert {c.paper_id for c in answer.citations} <= {r["id"] for r in holding}
    # with a filter stated in the question the count follows it
    since = service.ask(f"How many papers on {KEYWORD} since 2018?")
    assert since.counts is not None
    assert since.counts.papers == sum(r["year"] >= 2018 for r in holding)


def test_related_papers_are_the_nearest_others(corpus: Any) -> None:
    service, records = corpus
    related = service.related("p01", 5)
    assert len(related) == 5 and "p01" not in {s.paper_id for s in related}
    topic = {r["id"]: r["title"].rsplit(" part", 1)[0] for r in records}
    assert topic[related[0].paper_id] == topic["p01"]  # same topic first
    assert [s.score for s in related] == sorted((s.score for s in related), reverse=True)
    with pytest.raises(InputError, match="No paper with id"):
        service.related("nope", 3)


def test_the_cli_filters_by_author_and_lists_related_papers(corpus: Any) -> None:
    service, _ = corpus
    env = {
        "AQA_DATA_DIR": str(service.settings.data_dir),
        "HF_HUB_OFFLINE": "1",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [str(EXE), "ask", "causal discovery", "--author", "Ada Lovelace", "--json"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    answer = json.loads(out.stdout)
    assert answer["filters_applied"] == "author Ada Lovelace"
    assert all("Ada Lovelace" in s["authors"] for s in answer["sources"])
    out = subprocess.run(
        [str(EXE), "related", "p02", "--k", "3", "--json"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert len(json.loads(out.stdout)) == 3
    counted = subprocess.run(
        [str(EXE), "ask", f"How many papers mention {KEYWORD}?", "--json"],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert json.loads(counted.stdout)["counts"]["papers"] == 6


def test_counts_show_as_a_chart_and_a_read_filter_can_be_removed(
    corpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, _ = corpus
    at = start_app(monkeypatch, Path(service.settings.data_dir))
    at.chat_input[0].set_value(f"How has work on {KEYWORD} grown over the years?").run()
    assert not at.exception
    charts = at.get("vega_lite_chart")
    assert len(charts) >= 1  # per year (and per venue in the second tab)
    assert [t.label for t in at.tabs][:2] == ["Papers per year", "Papers per venue"]
    at.chat_input[0].set_value("Which papers by Sergey Levine study causal discovery?").run()
    remove = [b for b in at.button if "author filter" in str(b.label)]
    assert remove, [b.label for b in at.button]
    remove[-1].click().run()
    assert not at.exception
    last = at.session_state.messages[-1]["answer"]
    assert last.filters.authors == [] and last.filters.from_question == []


@pytest.mark.parametrize(
    "question",
    [
        "Which paper is about multi-task learning by deep collaboration?",
        "Which paper is about regulatory redundancy by learnable global perturbations?",
        "how is learning by design done?",
    ],
)
def test_lower_case_words_after_by_are_no_author(question: str) -> None:
    # "de" and "le" are surnames of real authors (Abir De); "by deep ..." names nobody
    filters, _ = parse_filters(
        question, set(), None, {"de": ["Abir De"], "le": ["Quoc Le"], "design": ["A Design"]}
    )
    assert filters.authors == []


def test_particles_belong_to_a_name() -> None:
    filters, _ = parse_filters(
        "papers by Nando de Freitas on learning", set(), None, {"freitas": ["Nando de Freitas"]}
    )
    assert filters.authors == ["Nando de Freitas"]

"""Answers taken out: Markdown with every cited paper's links, BibTeX and CSL-JSON that a
reference manager (and our own ingest) reads, JSON as the API gives it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import bibtexparser
import pytest

from app.engine.export import cite_keys, export, format_for
from app.engine.service import QAService
from core.errors import InputError
from core.models import Answer, Paper
from core.settings import Settings
from tests.conftest import EXE, ROOT

LIBRARY = ROOT / "tests" / "fixtures" / "library"
QUESTION = "How do contextual bandits handle resource constraints such as knapsacks?"


@pytest.fixture
def library_service(settings: Settings) -> QAService:
    from ingest.pipeline import ingest

    ingest([LIBRARY], settings)
    return QAService(settings)


def test_each_format_carries_the_cited_papers_and_reingests_as_the_same(
    library_service: QAService, settings: Settings
) -> None:
    from ingest.pipeline import ingest
    from store.index import Index

    service = library_service
    answer = service.ask(QUESTION)
    assert answer.cited_sources and answer.cited_sources[0].paper_id == "doi:10.5555/colt.2014.rcb"
    md = export([answer], "markdown", service.paper)
    assert md.startswith(f"## {QUESTION}\n\n{answer.answer}\n")
    assert "**Resourceful Contextual Bandits**" in md
    assert "<https://doi.org/10.5555/colt.2014.rcb>" in md and "Badanidiyuru" in md
    for citation in answer.citations:
        assert all(f"   > {s}" in md for s in citation.supporting)

    everything = export([answer], "bibtex", service.paper, everything=True)
    parsed = bibtexparser.parse_string(everything)
    assert len(parsed.entries) == len({s.paper_id for s in answer.sources})
    assert not parsed.failed_blocks
    keys = [e.key for e in parsed.entries]
    assert len(keys) == len(set(keys)) and keys[0] == "badanidiyuru2014resourceful"
    bandits = parsed.entries[0].fields_dict
    assert (
        bandits["doi"].value == "10.5555/colt.2014.rcb" and "knapsacks" in bandits["abstract"].value
    )

    path = settings.data_dir.parent / "export.bib"
    path.write_text(everything)
    before = Index(settings).stats().papers
    again = ingest([path], settings)
    assert (again.added, Index(settings).stats().papers) == (0, before)

    items = json.loads(export([answer], "csl-json", service.paper))
    assert items[0]["DOI"] == "10.5555/colt.2014.rcb" and items[0]["issued"] == {
        "date-parts": [[2014]]
    }
    assert items[0]["author"][0] == {"family": "Badanidiyuru", "given": "Ashwinkumar"}
    as_json = export([answer], "json", service.paper)
    assert Answer.model_validate_json(as_json) == answer


def test_a_conversation_exports_every_answer(library_service: QAService) -> None:
    service = library_service
    answers = [
        service.ask(QUESTION),
        service.ask("Which prior does the grammar induction model use?"),
    ]
    md = export(answers, "markdown", service.paper)
    assert md.count("\n## ") == 1 and all(f"## {a.question}" in md for a in answers)
    assert "<https://arxiv.org/abs/0812.1234>" in md
    cited = [service.paper(s.paper_id) for a in answers for s in a.cited_sources]
    assert len(cited) >= 2
    for paper in cited:  # every cited paper of every answer, with each link it has
        links = [u for u in (paper.url, paper.doi_url, paper.arxiv_url) if u]
        assert links and all(f"<{u}>" in md for u in links), paper.paper_id


def test_keys_are_author_year_word_and_unique() -> None:
    def paper(i: int, title: str, authors: list[str]) -> Paper:
        return Paper(paper_id=str(i), title=title, abstract="x", authors=authors, year=2017)

    papers = [
        paper(1, "Attention Is All You Need", ["Ashish Vaswani"]),
        paper(2, "Attention, again", ["Ashish Vaswani"]),
        paper(3, "The Élan of Models", ["Jörg Müller"]),
        paper(4, "On a Topic", []),
    ]
    assert cite_keys(papers) == [
        "vaswani2017attention", "vaswani2017attentiona", "muller2017elan", "anon2017topic",
    ]  # fmt: skip


def test_the_format_comes_from_the_file_name() -> None:
    assert [format_for(n) for n in ("a.md", "a.BIB", "a.csl.json", "a.json")] == [
        "markdown", "bibtex", "csl-json", "json",
    ]  # fmt: skip
    with pytest.raises(InputError, match=r"\.csl\.json"):
        format_for("notes.docx")


def test_the_cli_exports_beside_its_answer(tmp_path: Path, settings: Settings) -> None:
    from ingest.pipeline import ingest

    ingest([LIBRARY / "zotero-export.bib"], settings)
    target = tmp_path / "answer.md"
    done = subprocess.run(
        [str(EXE), "ask", QUESTION, "--export", str(target)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"Exported to {target}" in done.stderr
    assert "<https://doi.org/10.5555/colt.2014.rcb>" in target.read_text()
    wrong = subprocess.run(
        [str(EXE), "ask", QUESTION, "--export", str(tmp_path / "a.docx")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert wrong.returncode == InputError.exit_code and ".csl.json" in wrong.stderr

"""The Streamlit app through Streamlit's AppTest: what a user sees after each action."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.providers.wording import CANNOT_ANSWER
from app.ui.shared import escape, linked
from core.settings import Settings
from tests.conftest import ROOT, start_app


def shown(at: AppTest) -> str:
    return "\n".join(str(m.value) for m in at.markdown)


def card_markers(at: AppTest) -> list[int]:
    return [int(n) for n in re.findall(r'class="aqa-head"><b>\[(\d+)\]</b>', shown(at))]


def test_an_answer_shows_citation_markers_and_matching_source_cards(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.chat_input[0].set_value("Which papers study federated learning?").run()
    assert not at.exception
    page = shown(at)
    cited = sorted({int(n) for n in re.findall(r'<sup class="aqa-cite">\[(\d+)\]</sup>', page)})
    assert len(cited) >= 2
    assert card_markers(at)[: len(cited)] == cited  # a card for each citation, in order
    assert "<mark>" in page  # the supporting sentence is highlighted
    assert "Papers" in [m.label for m in at.metric] and at.metric[0].value == "57"

    at.chat_input[0].set_value("What about asynchronous clients?").run()
    assert len(at.chat_message) == 4  # history kept: two questions, two answers


def test_filters_change_what_is_retrieved(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.slider(key="years").set_value((2024, 2024)).run()
    at.chat_input[0].set_value("Which papers study federated learning?").run()
    cards = re.findall(r'<div class="aqa-muted">[^<]*?(\d{4}) · score', shown(at))
    assert cards and set(cards) == {"2024"}
    # a figure keeps its name: the card's relevance is the Answer's (as in the API, CLI and MCP)
    answer = at.session_state.messages[-1]["answer"]
    expected = {f"{s.score:.2f}/{s.relevance:.2f}" for s in answer.cited_sources}
    figures = re.findall(r"· score ([\d.]+) · relevance ([\d.]+)</div>", shown(at))
    assert expected and expected <= {f"{a}/{b}" for a, b in figures}
    assert "Filters: years from 2024" in " ".join(str(c.value) for c in at.caption)


def test_an_out_of_corpus_question_shows_an_abstention_without_citations(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.chat_input[0].set_value("What is the best recipe for a chocolate cake?").run()
    assert [i.value for i in at.info] == [CANNOT_ANSWER]
    assert '<sup class="aqa-cite">' not in shown(at)
    assert at.expander[0].label.startswith("Retrieved passages (none was relevant")


def test_error_states_show_their_fix_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    at = start_app(monkeypatch, isolated_env)
    assert "The index is empty" in at.warning[0].value
    at = start_app(monkeypatch, isolated_env, AQA_LLM="openai")
    assert "OPENAI_API_KEY" in at.error[0].value
    at = start_app(monkeypatch, isolated_env, AQA_TOP_KK="3")
    assert "AQA_TOP_KK" in at.error[0].value


def test_an_upload_ingests_and_reports(monkeypatch: pytest.MonkeyPatch, isolated_env: Path) -> None:
    at = start_app(monkeypatch, isolated_env)
    at.switch_page("pages/ingest.py").run()
    good = {
        "id": "u1",
        "title": "Upload test",
        "abstract": "We upload an abstract about graphs. Code: \\url{https://github.com/x/g_r}.",
    }
    hostile = {
        "id": "u2",
        "title": "<script>alert(1)</script> **bold**",
        "abstract": "An abstract with <script>alert('x')</script> and $x^2$ and [a](javascript:1).",
    }
    body = "\n".join([json.dumps(good), "{broken", json.dumps(hostile)]).encode()
    at.file_uploader(key="uploads").set_value(("papers.jsonl", body, "application/json")).run()
    at.button[0].click().run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Papers read"] == "2" and metrics["Added"] == "2"
    rejected = at.dataframe[0].value
    assert list(rejected["line"]) == [2] and "malformed JSON" in rejected["reason"][0]

    at.switch_page("pages/chat.py").run()
    at.chat_input[0].set_value("abstract with alert and javascript").run()
    page = shown(at)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "&#42;&#42;bold&#42;&#42;" in page  # markdown shown as typed
    assert "&#91;a&#93;&#40;javascript&#58;1&#41;" in page  # no link is made
    assert "x^2" in page and "$x^2$" not in page  # LaTeX shown as text, not rendered as math

    at.chat_input[0].set_value("Where is the code of the abstract about graphs?").run()
    page = shown(at)  # the address in the abstract is a link; the \url markup is gone
    assert '<a href="https://github.com/x/g_r" target="_blank"' in page
    assert "url&#123;" not in page and "\\url" not in page


def test_only_web_addresses_become_links() -> None:
    out = linked("see https://a.org/x_y. and javascript:alert(1) or <b>http://b.org</b>")
    assert out.count("<a href=") == 2 and 'href="https://a.org/x_y"' in out
    assert "javascript&#58;alert" in out and "<b>" not in out


def test_escape_neutralises_html_and_markdown() -> None:
    text = "<img src=x onerror=alert(1)> **b** _i_ [l](u) $m$ `c` # h"
    out = re.sub(r"&#?\w+;", "", escape(text))
    assert "<" not in out.replace("<br>", "") and ">" not in out
    for char in "*_[]()$`#":
        assert char not in out


def test_a_bibtex_upload_is_named_reported_and_its_cards_link_the_doi(
    monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    at = start_app(monkeypatch, isolated_env)
    at.switch_page("pages/ingest.py").run()
    bib = (ROOT / "tests" / "fixtures" / "library" / "zotero-export.bib").read_bytes()
    at.file_uploader(key="uploads").set_value(("my library.bib", bib, "text/plain")).run()
    at.button[0].click().run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Papers read"] == "4"
    assert any("my library.bib as BibTeX" in c.value for c in at.caption)
    assert "1 record(s) have no abstract" in at.warning[0].value
    rejected = at.dataframe[0].value  # no abstract, and the broken entry, by line
    assert sorted(rejected["line"]) == [55, 63]

    at.switch_page("pages/chat.py").run()
    at.chat_input[0].set_value(
        "contextual bandits with resource constraints such as knapsacks"
    ).run()
    page = shown(at)
    assert '<a href="https://doi.org/10.5555/colt.2014.rcb" target="_blank">DOI</a>' in page
    downloads = at.get("download_button")  # Markdown, BibTeX, CSL-JSON of the answer
    assert len(downloads) == 3 and not at.exception

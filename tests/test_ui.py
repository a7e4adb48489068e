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
from store.feedback import FeedbackStore
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
    at.switch_page("views/ingest.py").run()
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

    at.switch_page("views/chat.py").run()
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
    at.switch_page("views/ingest.py").run()
    bib = (ROOT / "tests" / "fixtures" / "library" / "zotero-export.bib").read_bytes()
    at.file_uploader(key="uploads").set_value(("my library.bib", bib, "text/plain")).run()
    at.button[0].click().run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Papers read"] == "4"
    assert any("my library.bib as BibTeX" in c.value for c in at.caption)
    assert "1 record(s) have no abstract" in at.warning[0].value
    rejected = at.dataframe[0].value  # no abstract, and the broken entry, by line
    assert sorted(rejected["line"]) == [55, 63]

    at.switch_page("views/chat.py").run()
    at.chat_input[0].set_value(
        "contextual bandits with resource constraints such as knapsacks"
    ).run()
    page = shown(at)
    assert '<a href="https://doi.org/10.5555/colt.2014.rcb" target="_blank">DOI</a>' in page
    # Markdown, BibTeX, CSL-JSON of the answer, and of the conversation (in the sidebar)
    downloads = at.get("download_button")
    assert len(downloads) == 6 and not at.exception


def test_a_rating_and_its_comment_are_stored_and_listed_on_the_feedback_page(
    monkeypatch: pytest.MonkeyPatch, index: Path
) -> None:
    at = start_app(monkeypatch, index)
    at.chat_input[0].set_value("What is DASHA?").run()
    answer = at.session_state.messages[-1]["answer"]
    store = FeedbackStore(index)
    before = len(store.all())

    at.feedback[0].set_value(0).run()  # thumbs down
    assert not at.exception
    (stored,) = store.all()[before:]
    assert stored.rating == "down" and stored.question == "What is DASHA?"
    assert stored.cited == [s.paper_id for s in answer.cited_sources]
    (comment,) = [t for t in at.text_input if str(t.key).startswith("comment-")]
    comment.set_value("It does not say which rate it improves.").run()
    at.feedback[0].set_value(1).run()  # changed to thumbs up: the same rating, not a second
    (stored,) = store.all()[before:]
    assert (stored.rating, stored.comment) == ("up", "It does not say which rate it improves.")
    at.feedback[0].set_value(None).run()  # taken back
    assert len(store.all()) == before
    at.feedback[0].set_value(0).run()

    # another page and back: the thumb and the comment show what is stored
    at.switch_page("views/ingest.py").run()
    at.switch_page("views/chat.py").run()
    assert at.feedback[0].value == 0 and not at.exception
    (comment,) = [t for t in at.text_input if str(t.key).startswith("comment-")]
    comment.set_value("Still wrong after a page switch.").run()
    assert store.all()[-1].comment == "Still wrong after a page switch."
    assert len(store.all()) == before + 1

    at.switch_page("views/feedback.py").run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Thumbs down"] == str(len([r for r in store.all() if r.rating == "down"]))
    table = at.dataframe[0].value
    assert "What is DASHA?" in set(table["question"])
    (download,) = at.get("download_button")
    assert not at.exception and download


def test_a_link_asks_its_question_as_the_page_opens(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("AQA_DATA_DIR", str(sample_settings.data_dir))
    at = AppTest.from_file(str(ROOT / "app" / "ui" / "streamlit_app.py"), default_timeout=180)
    at.query_params["q"] = "What is DASHA?"
    at.run()
    assert not at.exception
    assert [m.name for m in at.chat_message] == ["user", "assistant"]
    assert "DASHA" in at.session_state.messages[-1]["answer"].answer
    links = [c.value for c in at.caption if "Link to this question" in c.value]
    assert links and "?q=What+is+DASHA%3F" in links[0]
    at.run()  # a rerun of the same page does not ask again
    assert len(at.chat_message) == 2
    at.chat_input[0].set_value("Which papers study federated learning?").run()
    assert at.query_params["q"] == "Which papers study federated learning?"


def test_an_answer_stopped_while_it_streamed_is_kept_as_far_as_it_went(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    """The chat input's stop button ends the run mid-stream; the next run shows what was
    written, marked as stopped (the browser cannot click it in time on the extractive path)."""
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.chat_input[0].set_value("What is DASHA?").run()
    at.session_state["messages"] = [*at.session_state.messages[:2],
                                    {"role": "user", "content": "And MARINA?"}]  # fmt: skip
    at.session_state["streaming"] = {"id": "s1", "question": "And MARINA?", "text": "MARINA is"}
    at.run()
    assert not at.exception
    assert [m.name for m in at.chat_message] == ["user", "assistant", "user", "assistant"]
    assert any("Stopped before the answer was finished" in c.value for c in at.caption)
    assert "MARINA is" in shown(at)
    at.chat_input[0].set_value("What is DASHA?").run()  # the conversation goes on
    assert len(at.chat_message) == 6 and not at.exception

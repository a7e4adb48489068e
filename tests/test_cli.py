"""The `abstract-qa` command as a script would call it: stable JSON, exit codes, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from tests.conftest import EXE, ROOT, SAMPLE


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=600
    )


def test_ingest_json_report_and_stats(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = (SAMPLE / "iclr2024.txt").read_text().splitlines()
    (corpus / "few.txt").write_text("\n".join(lines[:7]) + "\n")  # header + 3 abstracts
    (corpus / "bad.jsonl").write_text('{"abstract": "A fine abstract about kernels."}\n{oops\n')
    result = run("ingest", str(corpus), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("added", "updated", "unchanged", "removed", "papers"):
        assert isinstance(report[key], int)
    assert report["papers"] == 4 and report["added"] >= 4 and report["files"] == 2
    assert report["skipped"] == [
        {"file": str(corpus / "bad.jsonl"), "line": 2, "reason": report["skipped"][0]["reason"]}
    ]
    assert "malformed JSON" in report["skipped"][0]["reason"]

    human = run("ingest", str(corpus))
    assert human.returncode == 0
    assert f"{report['added']} unchanged" in human.stdout
    assert f"{corpus / 'bad.jsonl'}:2: malformed JSON" in human.stdout

    stats = json.loads(run("stats", "--json").stdout)
    assert stats["papers"] == 4 and stats["chunks"] == report["added"]
    assert stats["venues"] == {"ICLR": 3, "unknown": 1}


def test_nothing_readable_exits_non_zero_with_reasons(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    result = run("ingest", str(tmp_path / "empty.csv"), str(tmp_path / "nope.jsonl"))
    assert result.returncode == 1
    assert f"{tmp_path / 'empty.csv'}: empty file" in result.stdout
    assert f"{tmp_path / 'nope.jsonl'}: no such file or directory" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_misspelt_setting_is_one_clear_line(tmp_path: Path) -> None:
    result = run("stats", AQA_DATA_DIRR=str(tmp_path))
    assert result.returncode == ConfigError.exit_code
    assert "AQA_DATA_DIRR" in result.stderr and "AQA_DATA_DIR" in result.stderr
    assert "Traceback" not in result.stderr


def test_make_targets_exist_for_the_readme_commands() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "\nrun:" in makefile and "\ntest:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_ask_json_has_the_answer_fields(sample_settings: Any) -> None:
    result = run(
        "ask", "Which papers study federated learning?", "--json", "--k", "4",
        "--year-from", "2023", "--venue", "ICLR",
        AQA_DATA_DIR=str(sample_settings.data_dir),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert {"answer", "citations", "sources", "abstained", "filters", "timings"} <= set(answer)
    assert len(answer["sources"]) == 4 and not answer["abstained"]
    cited = {c["marker"]: c["paper_id"] for c in answer["citations"]}
    assert cited and all(answer["sources"][m - 1]["paper_id"] == p for m, p in cited.items())
    assert answer["filters_applied"] == "venue ICLR, years from 2023"
    empty = run("ask", "  ", AQA_DATA_DIR=str(sample_settings.data_dir))
    assert empty.returncode == 2 and "question is empty" in empty.stderr


def test_ingest_names_each_format_and_takes_a_forced_one(tmp_path: Path) -> None:
    library = ROOT / "tests" / "fixtures" / "library"
    (tmp_path / "library.txt").write_text((library / "zotero-export.bib").read_text())
    result = run("ingest", str(tmp_path / "library.txt"), str(library / "endnote.ris"),
                 "--format", "bibtex")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"Read {tmp_path / 'library.txt'} as BibTeX." in result.stdout
    assert f"Read {library / 'endnote.ris'} as BibTeX." in result.stdout  # forced: read as told
    assert "1 record(s) have no abstract" in result.stdout
    assert f"{tmp_path / 'library.txt'}:63: malformed BibTeX entry" in result.stdout
    named = run("ingest", str(library / "endnote.ris"), "--json")
    report = json.loads(named.stdout)
    assert report["formats"] == {str(library / "endnote.ris"): "RIS"}
    assert report["merged"][0]["reason"].startswith("same paper (by title) as indexed paper")
    wrong = run("ingest", str(library / "endnote.ris"), "--format", "endnote")
    assert wrong.returncode == 2 and "choose one of jsonl, json" in wrong.stderr

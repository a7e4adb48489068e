"""Hostile corpora, extreme records, crashes and odd questions: each fails in a boring way.

Real Chroma in temp directories and the real local model throughout. The OpenAI-compatible path
with the same hostile corpus is in test_openai_server.py; secrets are in test_secrets.py.
"""

from __future__ import annotations

import codecs
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from chromadb.api.client import SharedSystemClient

from app.engine.service import QAService
from app.providers.wording import defuse, format_sources, is_refusal
from app.ui.shared import answer_html, source_card
from core.errors import InputError
from core.models import Answer
from core.settings import Settings
from ingest.pipeline import ingest
from ingest.read import MAX_ABSTRACT_CHARS, read_paths
from store.index import Index
from tests.conftest import (
    EXE,
    HOSTILE,
    INJECTIONS,
    SAMPLE,
    assert_citations_real,
    bm25_ids,
    chroma_ids,
    make_settings,
    raw_collection,
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> QAService:
    """The sample plus five abstracts that carry injected instructions, markers and markup."""
    settings = make_settings(data_dir=tmp_path_factory.mktemp("hostile"))
    report = ingest([HOSTILE, SAMPLE], settings)
    assert report.papers == 62 and not report.skipped
    return QAService(settings)


def cited_ids(answer: Answer) -> set[str]:
    return {c.paper_id for c in answer.citations}


# --- prompt injection, extractive provider ---------------------------------------------------


@pytest.mark.parametrize(("question", "paper", "fact"), INJECTIONS)
def test_injected_text_is_quoted_never_obeyed(
    hostile: QAService, question: str, paper: str, fact: str
) -> None:
    answer = hostile.ask(question)
    assert not answer.abstained, "an injected refusal sentence must not silence the answer"
    assert paper in cited_ids(answer)
    assert fact in answer.answer
    assert_citations_real(answer)
    # markers written in the abstracts ([7], [9], [12], [99], [1, 42]) never become citations
    assert answer.invalid_citations == []
    assert {c.marker for c in answer.citations} <= {s.marker for s in answer.sources}


def test_the_prompt_delimits_hostile_sources(hostile: QAService) -> None:
    answer = hostile.ask("theorem prover curriculum, protein contrastive, sparse experts", k=8)
    block, used = format_sources(answer.sources, 10_000)
    hostile_ids = {"inject-system", "inject-ignore", "inject-markers"}
    assert hostile_ids <= {s.paper_id for s in used}
    # one opening and one closing tag per source: an abstract cannot close its own
    assert block.count("<source id=") == block.count("</source>") == len(used)
    assert re.findall(r'<source id="(\d+)">', block) == [str(s.marker) for s in used]
    assert "<script" not in block and "</source>\nSYSTEM" not in block
    # no citation-shaped marker and no refusal sentinel inside the data
    assert not re.search(r"\[\s*\d+(\s*[,;]\s*\d+)*\s*\]", block)
    assert not is_refusal(block)
    assert "(7)(99)" in block  # defused, still readable


def test_the_ui_renders_hostile_markup_inert(hostile: QAService) -> None:
    answer = hostile.ask("How much do graph transformers lower traffic forecasting error?")
    source = next(s for s in answer.sources if s.paper_id == "inject-html")
    assert source.url and source.url.startswith("javascript:")
    html = answer_html(answer) + source_card(source, ["The traffic graph transformer"])
    for live in ("<script", "<img", 'href="javascript', "](javascript", "](http"):
        assert live not in html, live
    assert "&lt;script&gt;" in html and "&lt;img" in html  # shown as text


def test_defuse_leaves_ordinary_text_alone() -> None:
    text = "Accuracy rises from 71.2% to 80.4% (p < 0.01) on [CLS]-free inputs."
    assert defuse(text) == text
    assert defuse("see [3] and [4, 5]") == "see (3) and (4, 5)"


# --- extreme records ---------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return path


LATIN1 = "Café “naïve” results."
ODD_IDS = ["a/b c", "ünï-çødé/🙂", "x:y:0", "id with\ttab", "arxiv:2101.00001v2", "%2F..%2F"]


def test_extreme_records_are_indexed_or_skipped_with_a_reason(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    base = "We study robust optimisation of deep networks under distribution shift."
    write_jsonl(
        corpus / "extreme.jsonl",
        [
            {"id": "huge", "abstract": "word " * 210_000},  # 1 MB
            {"id": "one-word", "title": "Transformers", "abstract": "Transformers"},
            *[{"id": odd, "abstract": f"{base} Variant {i}."} for i, odd in enumerate(ODD_IDS)],
            {"id": "x" * 300, "abstract": base + " Long id."},
            {"id": 12345, "abstract": base + " Integer id."},
            {"id": {"nested": 1}, "abstract": base + " Object id."},
            {"id": "types", "abstract": base + " Types.", "year": "n/a", "title": 42,
             "authors": "Ada Lovelace; Alan Turing", "venue": ["ICLR"], "keywords": 7},
            {"id": "float-year", "abstract": base + " Float year.", "year": 2020.0},
            {"id": "bool-year", "abstract": base + " Bool year.", "year": True},
            {"id": "num-abstract", "abstract": 17},
            {"id": "list-abstract", "abstract": ["a", "b"]},
            {"id": "null-abstract", "abstract": None},
            "just a string",
        ],
    )  # fmt: skip
    write_jsonl(corpus / "dups.jsonl", [{"id": "dup", "abstract": base + " Dup."}] * 3000)
    (corpus / "latin1.jsonl").write_bytes(
        json.dumps({"id": "latin1", "abstract": LATIN1}, ensure_ascii=False).encode("cp1252")
        + b"\n"
    )
    (corpus / "utf16.jsonl").write_bytes(
        codecs.BOM_UTF16_LE
        + json.dumps(
            {"id": "utf16", "abstract": "Schrödinger bridges, 量子."}, ensure_ascii=False
        ).encode("utf-16-le")
    )
    (corpus / "bom.csv").write_bytes(
        codecs.BOM_UTF8 + "id,title,abstract\nbom,Résumé,Ünïcode abstract here.\n".encode()
    )
    settings = make_settings(data_dir=tmp_path / "index")
    report = ingest([corpus], settings)

    skipped = {(Path(p.file).name, p.line): p.reason for p in report.skipped}
    assert f"over the {MAX_ABSTRACT_CHARS:,}" in skipped[("extreme.jsonl", 1)]
    assert "over 256" in skipped[("extreme.jsonl", 9)]
    assert skipped[("extreme.jsonl", 15)] == "abstract is int, not text"
    assert skipped[("extreme.jsonl", 16)] == "abstract is list, not text"
    assert skipped[("extreme.jsonl", 17)] == "no abstract"
    assert "expected an object" in skipped[("extreme.jsonl", 18)]
    dups = [r for (name, _), r in skipped.items() if name == "dups.jsonl"]
    assert len(dups) == 2999 and all("first read at" in r for r in dups)
    assert len(skipped) == 6 + 2999

    warned = {(Path(p.file).name, p.line): p.reason for p in report.warnings}
    assert "not a year" in warned[("extreme.jsonl", 12)]
    assert "not a year" in warned[("extreme.jsonl", 14)]
    assert "not text" in warned[("extreme.jsonl", 11)]
    assert "Windows-1252" in warned[("latin1.jsonl", 1)]

    papers = {p.paper_id: p for p in read_paths([corpus]).papers}
    assert papers["latin1"].abstract == LATIN1
    assert papers["utf16"].abstract == "Schrödinger bridges, 量子."
    assert papers["bom"].title == "Résumé"
    assert papers["types"].year is None and papers["types"].title == "42"
    assert papers["types"].authors == ["Ada Lovelace", "Alan Turing"]
    assert papers["float-year"].year == 2020 and papers["bool-year"].year is None
    assert "12345" in papers and "id with tab" in papers

    expected = set(papers)
    assert report.papers == len(expected) == 1 + 6 + 1 + 1 + 3 + 1 + 3
    col = raw_collection(settings)
    stored = {m["paper_id"] for m in col.get(include=["metadatas"])["metadatas"] or []}
    assert stored == expected
    again = ingest([corpus], settings)
    assert again.added == again.updated == again.removed == 0
    assert col.count() == report.chunks

    service = QAService(settings)
    one_word = service.ask("Transformers", mode="bm25")
    assert one_word.sources[0].paper_id == "one-word"
    odd = service.ask("robust optimisation of deep networks under distribution shift", k=20)
    assert {" ".join(i.split()) for i in ODD_IDS} <= {s.paper_id for s in odd.sources}
    assert_citations_real(odd)


# --- crash safety ------------------------------------------------------------------------------


def sample_corpora(tmp_path: Path) -> tuple[Path, Path]:
    """The sample with stable ids (A), and a version (B) where 8 papers changed: 4 grew a second
    chunk, 4 were rewritten. Going A -> B -> A embeds, replaces and deletes chunks."""
    papers = read_paths([SAMPLE]).papers
    a = [{"id": f"p{i}", "abstract": p.abstract, "year": p.year, "venue": p.venue}
         for i, p in enumerate(papers)]  # fmt: skip
    b = [dict(r) for r in a]
    for i in range(0, 8):
        r = b[i * 7]
        r["abstract"] = (
            r["abstract"] + " " + papers[i * 7 + 1].abstract
            if i < 4
            else "We revisit the problem. " + r["abstract"]
        )
    return write_jsonl(tmp_path / "a.jsonl", a), write_jsonl(tmp_path / "b.jsonl", b)


def snapshot(settings: Settings) -> dict[str, str]:
    got = raw_collection(settings).get(include=["metadatas"])
    return {
        cid: str(m["content_hash"])
        for cid, m in zip(got["ids"], got["metadatas"] or [], strict=True)
    }


# Kills, alternating A -> B and B -> A: at least MIN_RUNS, then until MID_WRITE of them have landed
# mid-write (between Chroma's write and the BM25 side's), at most MAX_RUNS. Each kill is a
# process start and an ingest; test_incremental kills at every write step in turn besides.
MIN_RUNS, MID_WRITE, MAX_RUNS = 4, 3, 12


@pytest.mark.slow
def test_ingest_killed_at_random_points_recovers_every_time(tmp_path: Path) -> None:
    corpus_a, corpus_b = sample_corpora(tmp_path)
    settings = make_settings(data_dir=tmp_path / "victim")
    ingest([corpus_a], settings)
    ref = make_settings(data_dir=tmp_path / "ref-b")
    ingest([corpus_b], ref)
    reference = {corpus_a: snapshot(settings), corpus_b: snapshot(ref)}  # each built from empty
    assert reference[corpus_a] != reference[corpus_b]

    env = {**os.environ, "AQA_DATA_DIR": str(settings.data_dir)}
    t = time.monotonic()  # one uninterrupted A -> B run times the window to kill in
    subprocess.run([str(EXE), "ingest", str(corpus_b)], env=env, check=True, capture_output=True)
    full = time.monotonic() - t
    assert snapshot(settings) == reference[corpus_b]

    rng = random.Random(20261130)
    mid_write = runs = 0
    for run in range(MAX_RUNS):
        if run >= MIN_RUNS and mid_write >= MID_WRITE:
            break
        runs += 1
        corpus = corpus_a if run % 2 == 0 else corpus_b
        proc = subprocess.Popen([str(EXE), "ingest", str(corpus)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        # within the run: a kill past about 0.85 of it found the work done (10 of 20 runs when
        # the window reached 1.1), which only cost time
        time.sleep(rng.uniform(0.2, 0.9) * full)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # open the index as a new process would: embedded Chroma caches its state per process
        # and does not see another process's writes (a Chroma server is for that)
        SharedSystemClient.clear_system_cache()
        index = Index(settings)
        chunks = index.chunks()
        assert chunks is not None and chunks.count() > 0, f"run {run}: the index does not open"
        saved = index.saved_bm25()
        mid_write += saved is None or saved.generation != chunks.generation
        # opening for a query repairs a stale BM25 side from Chroma
        assert bm25_ids(settings) == chroma_ids(settings), run
        report = ingest([corpus], settings)
        assert report.papers == 57 and report.chunks == len(reference[corpus])
        assert snapshot(settings) == reference[corpus], f"run {run}: differs after the re-run"
    print(f"{mid_write} of {runs} kills landed mid-write")
    assert mid_write >= MID_WRITE, f"only {mid_write} of {runs} kills landed mid-write"


# --- questions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("question", ["", "   \n\t ", "\x00\x07\x1b", "\u200b\u200b"])
def test_empty_questions_get_a_clear_message(sample_service: QAService, question: str) -> None:
    with pytest.raises(InputError, match="The question is empty"):
        sample_service.ask(question)


def test_a_50000_character_question_is_answered_from_its_start(sample_service: QAService) -> None:
    question = "Which papers study federated learning with heterogeneous clients? " + (
        "Please be thorough. " * 2600
    )
    assert len(question) > 50_000
    t = time.perf_counter()
    answer = sample_service.ask(question)
    assert time.perf_counter() - t < 30
    assert not answer.abstained and answer.citations
    assert_citations_real(answer)
    assert len(answer.standalone_question) < 2_000  # retrieval read the first 256 tokens


@pytest.mark.parametrize(
    "question",
    [
        "Welche Arbeiten untersuchen föderiertes Lernen mit heterogenen Clients?",
        "¿Qué artículos estudian el aprendizaje federado?",
        "哪些论文研究联邦学习",
        "Какие статьи изучают федеративное обучение?",
        "🤖🤖🤖 ???",
    ],
)
def test_non_english_questions_answer_with_real_citations_or_abstain(
    sample_service: QAService, question: str
) -> None:
    answer = sample_service.ask(question)
    if answer.abstained:
        assert answer.citations == [] and is_refusal(answer.answer)
    else:
        assert_citations_real(answer)

"""Incremental ingest: the BM25 side takes a write's changes as a segment and a merge folds
segments together, scoring exactly as a full build (and as bm25s) would; a kill at any step of
either leaves an index that opens and converges; a running server cites what a CLI ingest adds
and stops citing what `abstract-qa remove` deletes, without a restart."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from unittest import mock

import bm25s
import httpx
import numpy as np
import pytest
from chromadb.api.shared_system_client import SharedSystemClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.errors import InputError
from core.models import Answer, ModelSpec
from core.settings import Settings
from core.tokens import words
from ingest.pipeline import NICE, beside_queries, ingest, remove
from store.bm25 import BM25Index
from store.index import Index
from store.records import StoredChunk
from tests.conftest import (
    EXE,
    ROOT,
    api_server,
    bm25_ids,
    chroma_ids,
    make_settings,
    raw_collection,
)
from tests.test_hardening import sample_corpora, write_jsonl

WORDS = [
    "graph",
    "neural",
    "attention",
    "diffusion",
    "robust",
    "token",
    "sparse",
    "kernel",
    "bandit",
    "prior",
]
SPEC = ModelSpec(name="test-vectors", dim=4, chunk_tokens=256)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
texts = st.lists(st.sampled_from(WORDS), max_size=10).map(" ".join)
queries = st.lists(st.sampled_from([*WORDS, "unseen"]), min_size=1, max_size=4)


def record(cid: str, text: str) -> StoredChunk:
    paper = cid.split("#")[0]
    year = 2000 + int(hashlib.md5(text.encode()).hexdigest(), 16) % 25  # facets that change too
    return StoredChunk(chunk_id=cid, paper_id=paper, text=text, title_derived=True, year=year)


def vector(text: str) -> np.ndarray:
    seed = int(hashlib.md5(text.encode()).hexdigest(), 16) % 2**32
    return np.random.default_rng(seed).standard_normal(SPEC.dim).astype(np.float32)


def by_id(bm25: BM25Index, query: list[str]) -> dict[str, tuple[float, object, list[float]]]:
    scores = bm25.scores(words([" ".join(query)])[0])
    return {
        cid: (round(float(scores[i]), 4), bm25.facets["year"][i], bm25.vectors[i].tolist())
        for i, cid in enumerate(bm25.chunk_ids)
    }


@PROPERTY
@given(corpus=st.lists(texts, min_size=1, max_size=25), query=queries)
def test_bm25_scores_are_bm25s_scores(corpus: list[str], query: list[str]) -> None:
    corpus = [*corpus, "graph"]  # bm25s cannot index a corpus without a word
    rows = [(record(f"p{i}#0", t), vector(t)) for i, t in enumerate(corpus)]
    ours = BM25Index.build(rows, "g")
    reference = bm25s.BM25()  # the library the index used before it took changes in place
    reference.index(words([r.search_text for r, _ in rows]), show_progress=False)
    terms = words([" ".join(query)])[0]
    known = [t for t in terms if t in (reference.vocab_dict or {})]
    expected = reference.get_scores(known) if known else np.zeros(len(rows))
    np.testing.assert_allclose(ours.scores(terms), expected, rtol=1e-5, atol=1e-6)


step = st.tuples(st.sampled_from(["put", "put", "drop"]), st.integers(0, 12), texts)


@PROPERTY
@example(first={}, steps=[[("drop", 0, "")]], query=["graph"])  # found once: nothing indexed
@example(first={0: "graph"}, steps=[[("drop", 0, "")], [("put", 1, "")]], query=["graph"])
@given(first=st.dictionaries(st.integers(0, 12), texts, max_size=10),
       steps=st.lists(st.lists(step, min_size=1, max_size=4), min_size=1, max_size=8),
       query=queries)  # fmt: skip
def test_writes_kept_as_segments_score_as_a_full_build(
    first: dict[int, str], steps: list[list[tuple[str, int, str]]], query: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, mock.patch("store.segments.MAX_SEGMENTS", 3):
        settings = make_settings(data_dir=Path(tmp))
        writer, reader = Index(settings), Index(settings)
        chunks = writer.chunks(SPEC, create=True)
        assert chunks is not None
        with writer.write(chunks) as session:
            rows = [(record(f"p{n}#0", t), vector(t)) for n, t in first.items()]
            session.upsert([r for r, _ in rows], [v.tolist() for _, v in rows])
        for batch in steps:
            with writer.write(chunks) as session:
                for op, n, text in batch:
                    cid = f"p{n}#0"
                    if op == "put":
                        session.upsert([record(cid, text)], [vector(text).tolist()])
                    else:
                        session.delete([cid])
            if chunks.count():  # a reader holding the last generation reads only what is new
                assert sorted(reader.snapshot(SPEC).bm25.chunk_ids) == chroma_ids(settings)
        saved = writer.saved_bm25()
        assert saved is not None and saved.generation == chunks.generation
        full = BM25Index.build(chunks.scan(documents=True, vectors=True), "full")
        assert by_id(saved, query) == by_id(full, query)
        assert len(saved.blocks) <= 3 + 1  # merged as they grow
        SharedSystemClient.clear_system_cache()


# --- crash safety ------------------------------------------------------------------------------

# Runs an ingest that re-describes papers (no embedding: the model is not loaded, so each run is
# quick) and then a removal, every write merging (MAX_SEGMENTS = 1), and kills itself at step
# argv[1] (0: never); prints the steps it went through, in order.
KILLER = """
import json, os, signal, sys
import store.segments as segments
from store.chroma import ChunkCollection
from core.settings import get_settings
from ingest.pipeline import NICE, beside_queries, ingest, remove

segments.MAX_SEGMENTS = 1
at, steps = int(sys.argv[1]), []

def step(name, fn):
    def run(*args, **kwargs):
        steps.append(name)
        if len(steps) == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args, **kwargs)
    return run

for name in ("update", "delete", "set_generation", "with_vectors"):
    setattr(ChunkCollection, name, step(name, getattr(ChunkCollection, name)))
segments.Segment.save = step("segment", segments.Segment.save)
segments.Segment.merge = step("merge", segments.Segment.merge)
segments._write_atomic = step("manifest", segments._write_atomic)
ingest([sys.argv[2]], get_settings())
remove(json.loads(sys.argv[3]), get_settings())
print(json.dumps(steps))
"""
GONE = ["p3", "p4"]


def described(settings: Settings) -> dict[str, tuple[str, str]]:
    got = raw_collection(settings).get(include=["metadatas"])
    return {
        cid: (str(m["content_hash"]), str(m["meta_hash"]))
        for cid, m in zip(got["ids"], got["metadatas"] or [], strict=True)
    }


@pytest.mark.slow
def test_a_kill_at_any_step_of_an_update_or_a_merge_leaves_an_index_that_converges(
    tmp_path: Path,
) -> None:
    corpus_a, _ = sample_corpora(tmp_path)
    records = [json.loads(line) for line in corpus_a.read_text().splitlines()]
    for i, r in enumerate(records[:12]):  # 12 papers re-described: a new year
        r["year"] = 2000 + i
    corpus_c = write_jsonl(tmp_path / "c.jsonl", records)
    ref = make_settings(data_dir=tmp_path / "ref")
    ingest([corpus_a], ref)
    ingest([corpus_c], ref)
    remove(GONE, ref)
    reference = described(ref)

    settings = make_settings(data_dir=tmp_path / "victim")
    env = {**os.environ, "AQA_DATA_DIR": str(settings.data_dir), "HF_HUB_OFFLINE": "1"}

    def child(at: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", KILLER, str(at), str(corpus_c), json.dumps(GONE)],
            env=env, cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip

    ingest([corpus_a], settings)
    pristine = tmp_path / "pristine"
    shutil.copytree(settings.data_dir, pristine)
    whole = child(0)
    assert whole.returncode == 0, whole.stderr[-2000:]
    steps = json.loads(whole.stdout)
    # the ingest's write and merge, then the removal's write and merge: a kill at each step
    assert steps.count("merge") == 2 and steps.count("set_generation") == 4, steps
    assert described(settings) == reference

    for at in range(1, len(steps) + 1):
        SharedSystemClient.clear_system_cache()
        shutil.rmtree(settings.data_dir)  # back to A, as the uninterrupted run found it
        shutil.copytree(pristine, settings.data_dir)
        killed = child(at)
        assert killed.returncode == -9, f"step {at} ({steps[at - 1]}): not killed"
        SharedSystemClient.clear_system_cache()  # open the index as a new process would
        index = Index(settings)
        chunks = index.chunks()
        assert chunks is not None and chunks.count() > 0, f"step {at}: the index does not open"
        assert bm25_ids(settings) == chroma_ids(settings), f"step {at} ({steps[at - 1]})"
        ingest([corpus_c], settings)
        remove(GONE, settings)
        assert described(settings) == reference, f"step {at}: differs after the re-run"
        latest = Index(settings)
        now, saved = latest.chunks(), latest.saved_bm25()
        assert now is not None and saved is not None and saved.generation == now.generation
        full = BM25Index.build(now.scan(documents=True, vectors=True), "full")
        assert by_id(saved, ["graph", "robust"]) == by_id(full, ["graph", "robust"]), at


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own priority is Linux's")
def test_an_ingest_beside_queries_yields_the_cpu_and_hands_back_its_result_or_error() -> None:
    def priority() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert beside_queries(priority) == min(19, priority() + NICE)
    assert priority() == os.getpriority(os.PRIO_PROCESS, 0)  # the caller's is unchanged

    def fail() -> None:
        raise InputError("bad.jsonl:3: not JSON")

    with pytest.raises(InputError, match=r"bad\.jsonl:3"):
        beside_queries(fail)


# --- a running server --------------------------------------------------------------------------

NEW = {
    "id": "quokka-1",
    "title": "Quokkanet: sparse attention from marsupial foraging",
    "abstract": "We introduce Quokkanet, a sparse attention mechanism inspired by how marsupials "
    "forage. Quokkanet cuts the memory of long-document transformers by 40 percent.",
    "year": 2025,
}
QUESTION = "What does Quokkanet cut?"


def cites(answer: Answer, paper_id: str) -> bool:
    return not answer.abstained and paper_id in {c.paper_id for c in answer.citations}


def ask(client: httpx.Client) -> Answer:
    response = client.post("/ask", json={"question": QUESTION, "k": 3})
    assert response.status_code == 200, response.text
    return Answer.model_validate(response.json())


def cli(data_dir: Path, *args: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    done = subprocess.run(
        [str(EXE), *args, "--json"],
        env={**clean, "AQA_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", **env},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def served_sees_changes(data_dir: Path, tmp_path: Path, **env: str) -> None:
    """A server started before the change cites the paper a CLI ingest adds and stops citing
    it once `abstract-qa remove` deletes it; an ingest over HTTP does not load the model."""
    corpus = write_jsonl(tmp_path / "new.jsonl", [NEW])
    with (
        api_server(data_dir, tmp_path / "serve.log", **env) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        assert not cites(ask(client), "quokka-1")
        added = cli(data_dir, "ingest", str(corpus), **env)
        assert added["added"] == 1 and "model" in dict(added["timings"])  # type: ignore[arg-type]
        assert cites(ask(client), "quokka-1")  # no restart
        removed = cli(data_dir, "remove", "quokka-1", **env)
        assert removed["papers"] == 1 and removed["removed"] == 1
        assert not cites(ask(client), "quokka-1")
        # the server's own ingest uses the model it has loaded
        upload = [("files", ("new.jsonl", corpus.read_bytes(), "application/jsonl"))]
        report = client.post("/ingest", files=upload).json()
        assert report["added"] == 1 and "model" not in report["timings"], report
        assert cites(ask(client), "quokka-1")


@pytest.mark.slow
@pytest.mark.server
def test_a_running_server_sees_what_the_cli_adds_and_removes(index: Path, tmp_path: Path) -> None:
    served_sees_changes(index, tmp_path)

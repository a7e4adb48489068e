"""A researcher's own library ingests as it is: BibTeX, RIS, CSL-JSON, Zotero CSV, the arXiv
snapshot, OpenAlex and Semantic Scholar files (tests/fixtures/library, written by hand from each
format's specification and the exports of Zotero, EndNote, Crossref and the APIs)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from core.models import IngestReport, Paper
from core.settings import Settings
from ingest.identity import clean_arxiv_id, clean_doi, title_key
from ingest.read import read_paths
from ingest.schemas import inverted_abstract
from tests.conftest import ROOT

LIBRARY = ROOT / "tests" / "fixtures" / "library"
BANDITS = "doi:10.5555/colt.2014.rcb"  # in the .bib, the .ris, the CSL-JSON and the S2 file
GRAMMARS = "arxiv:0812.1234"  # .bib (eprint), .ris (title only), CSL (URL), arXiv snapshot
MARKUP = ("{", "}", "\\", "$", "<jats", "</")


def by_id(papers: list[Paper]) -> dict[str, Paper]:
    return {p.paper_id: p for p in papers}


def test_each_format_is_named_and_read_with_its_fields() -> None:
    result = read_paths([LIBRARY])
    assert {Path(f).name: label for f, label in result.formats.items()} == {
        "arxiv-snapshot.jsonl": "arXiv metadata",
        "endnote.ris": "RIS",
        "openalex-works.json": "OpenAlex works",
        "semantic-scholar.jsonl": "Semantic Scholar papers",
        "zotero-csl.json": "CSL-JSON",
        "zotero-export.bib": "BibTeX",
        "zotero.csv": "Zotero CSV",
    }
    papers = by_id(result.papers)
    assert len(papers) == 10
    for paper in papers.values():  # no braces, LaTeX or markup left in what is shown
        assert not any(m in paper.title or m in paper.abstract for m in MARKUP), paper
    bandits = papers[BANDITS]
    assert bandits.authors == ["Ashwinkumar Badanidiyuru", "John Langford", "Aleksandrs Slivkins"]
    assert (bandits.year, bandits.venue) == (2014, "Conference on Learning Theory (COLT)")
    assert (bandits.doi, bandits.arxiv_id) == ("10.5555/colt.2014.rcb", "1402.6779")
    assert bandits.doi_url == "https://doi.org/10.5555/colt.2014.rcb"
    assert "Dudík et al." in bandits.abstract  # the longest abstract of the four exports
    grammars = papers[GRAMMARS]
    assert grammars.year == 2008  # the first version's date, not the snapshot's update_date
    assert "logistic normal distribution as a prior" in grammars.abstract
    assert grammars.arxiv_url == "https://arxiv.org/abs/0812.1234"
    hypergraphs = papers["arxiv:1312.5179"]  # BibTeX gave the abstract, arXiv the id
    assert "total variation on hypergraphs, which we minimise in O(n log n)" in (
        hypergraphs.abstract
    )
    lasso = papers["doi:10.5555/example.lasso"]  # the arXiv snapshot: LaTeX and line breaks
    assert lasso.title == "Sparse l_1 Recovery with the Lasso"
    assert "recovers k-sparse signals from O(k log p) noisy measurements" in lasso.abstract
    assert lasso.keywords == ["math.ST", "stat.TH"] and lasso.year == 2017
    umlauts = papers["arxiv:2103.01234"]  # @online, accents, an arXiv link with its version
    assert (umlauts.title, umlauts.authors) == (
        "Schrödinger Bridges for École Data",
        ["Jörg Müller"],
    )
    assert "naïve priors" in umlauts.abstract and "95% of the cost" in umlauts.abstract
    rules = papers["doi:10.5555/nips.1991.rules"]  # OpenAlex; its .bib entry had no abstract
    assert (
        "tests on molecular-biology problems rules show" in rules.abstract
    )  # one position, two words
    assert rules.venue == "Neural Information Processing Systems"
    stage = papers["doi:10.5555/aistats.1997.stage"]  # Crossref-style CSL: JATS, lists
    assert stage.abstract.startswith("This paper describes") and "search algorithm A, we" in (
        stage.abstract
    )
    assert stage.authors == ["Justin A. Boyan", "Andrew W. Moore"] and "STAGE" in stage.keywords
    edges = next(p for p in papers.values() if p.title.startswith("Third-Order Edge"))
    assert edges.authors == ["Matthew Lawlor", "Steven W Zucker"] and edges.year == 2013
    assert edges.keywords == ["vision", "contours", "natural scenes"]
    crfs = next(p for p in papers.values() if p.title.startswith("Evidence-specific"))
    assert (crfs.year, crfs.venue) == (2010, "Advances in Neural Information Processing Systems 23")
    assert "order of magnitude speedup" in crfs.abstract  # N2 read as the abstract


def test_missing_abstracts_and_broken_entries_are_reported_and_the_rest_is_read() -> None:
    result = read_paths([LIBRARY])
    skipped = {(Path(p.file).name, p.line): p.reason for p in result.skipped}
    assert "malformed BibTeX entry (@article{broken2020,)" in skipped[("zotero-export.bib", 63)]
    assert "text outside a RIS record" in skipped[("endnote.ris", 21)]
    assert skipped[("endnote.ris", 35)] == "no abstract ('A record without an abstract')"
    assert skipped[("zotero.csv", 3)] == (
        "no abstract (entry 'P4M8ZQ2A', 'An Item Without An Abstract Note')"
    )
    assert "entry 'noabstract'" in skipped[("zotero-csl.json", 38)]
    assert (
        "entry 'aaaabbbbccccddddeeeeffff0000111122223333'"
        in (skipped[("semantic-scholar.jsonl", 2)])
    )
    assert len(skipped) == 6
    # the .bib entry without an abstract is the OpenAlex paper: merged, not missing
    merged = {(Path(p.file).name, p.line): p.reason for p in result.merged}
    assert merged[("zotero-export.bib", 55)].startswith("same paper (by title) as ")
    # a record whose ER line is missing ends with the file
    assert any(p.title == "A last record whose end line is missing" for p in result.papers)


def test_one_paper_exported_as_bibtex_ris_and_csl_json_is_one_paper(tmp_path: Path) -> None:
    result = read_paths(
        [LIBRARY / "zotero-export.bib", LIBRARY / "endnote.ris", LIBRARY / "zotero-csl.json"]
    )
    ids = [p.paper_id for p in result.papers]
    assert ids.count(BANDITS) == 1 and ids.count(GRAMMARS) == 1 and len(ids) == len(set(ids))
    reasons = [p.reason for p in result.merged]
    assert sum("by DOI 10.5555/colt.2014.rcb" in r for r in reasons) == 2  # .ris, CSL
    assert sum("by title" in r or "by arXiv id 0812.1234" in r for r in reasons) >= 2


def test_the_format_is_told_by_content_gzip_included_and_can_be_forced(tmp_path: Path) -> None:
    # OpenAlex's snapshot is JSON lines in .gz files; a .json name may hold JSON lines too
    work = json.loads((LIBRARY / "openalex-works.json").read_text())["results"][0]
    (tmp_path / "part_000.json").write_text(json.dumps(work) + "\n" + json.dumps(work) + "\n")
    with gzip.open(tmp_path / "export.bib.gz", "wt") as out:
        out.write((LIBRARY / "zotero-export.bib").read_text())
    result = read_paths([tmp_path / "part_000.json", tmp_path / "export.bib.gz"])
    assert list(result.formats.values()) == ["OpenAlex works", "BibTeX"]
    assert "doi:10.5555/nips.1991.rules" in by_id(result.papers)
    twice = (2, f"same paper (by DOI 10.5555/nips.1991.rules) as {tmp_path / 'part_000.json'}:1; "
             "merged into it")  # fmt: skip
    assert twice in [(p.line, p.reason) for p in result.merged]  # the same work twice: one
    # a BibTeX file under another name: not read until its format is named
    shutil.copy(LIBRARY / "zotero-export.bib", tmp_path / "library.txt")
    assert BANDITS not in by_id(read_paths([tmp_path / "library.txt"]).papers)
    forced = read_paths([tmp_path / "library.txt"], forced="bibtex")
    assert forced.formats == {str(tmp_path / "library.txt"): "BibTeX"}
    assert BANDITS in by_id(forced.papers)


def test_a_library_ingests_asks_and_updates_from_another_export(settings: Settings) -> None:
    from app.engine.service import QAService
    from ingest.pipeline import ingest
    from store.index import Index

    first = ingest([LIBRARY / "zotero-export.bib"], settings)
    assert (first.papers, first.formats) == (4, {str(LIBRARY / "zotero-export.bib"): "BibTeX"})
    assert first.without_abstract == 1  # towell1991rules, alone in this run
    answer = QAService(settings).ask(
        "Which prior over the grammar parameters does the Bayesian model for probabilistic "
        "grammars use?"
    )
    assert answer.citations and answer.citations[0].paper_id == GRAMMARS
    cited = next(s for s in answer.sources if s.paper_id == GRAMMARS)
    assert cited.arxiv_url == "https://arxiv.org/abs/0812.1234"

    # the library exported as RIS, which has no arXiv id for the grammar paper: its title
    # finds the indexed paper, which is updated, not added twice
    ris = ingest([LIBRARY / "endnote.ris"], settings)
    assert [(Path(p.file).name, p.line, p.reason) for p in ris.merged] == [
        ("endnote.ris", 12, f"same paper (by title) as indexed paper {GRAMMARS!r}; updated it")
    ]
    assert Index(settings).stats().papers == 4 + 2  # the CRF paper, the unterminated record
    csl = ingest([LIBRARY / "zotero-csl.json"], settings)  # by DOI and by arXiv id
    assert Index(settings).stats().papers == 6 + 1 and csl.without_abstract == 1
    assert ingest([LIBRARY / "zotero-export.bib"], settings).added == 0
    assert Index(settings).stats().papers == 7


@pytest.mark.parametrize(
    ("given_doi", "expected"),
    [
        ("https://doi.org/10.1145/3292500.3330701", "10.1145/3292500.3330701"),
        ("doi:10.18653/v1/N19-1423.", "10.18653/v1/n19-1423"),
        ("http://dx.doi.org/10.1000%2Fxyz123", "10.1000/xyz123"),
        ("10.1061/(ASCE)0733-9399(2002)128:1(3)", "10.1061/(asce)0733-9399(2002)128:1(3)"),
        ("(doi:10.1000/xyz123).", "10.1000/xyz123"),
        ("https://doi.org/10.1145/3292500.3330701?utm_source=x", "10.1145/3292500.3330701"),
        ("not a doi", None),
    ],
)
def test_dois_are_read_in_any_usual_spelling(given_doi: str, expected: str | None) -> None:
    assert clean_doi(given_doi) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("arXiv:1810.04805v2", "1810.04805"),
        ("https://arxiv.org/abs/2103.01234v3", "2103.01234"),
        ("http://arxiv.org/pdf/hep-th/9901001v1", "hep-th/9901001"),
        ("10.48550/arXiv.1706.03762", "1706.03762"),
        ("https://arxiv.org/pdf/1810.04805v2.pdf", "1810.04805"),
        ("math.AG/0309136", "math/0309136"),
        ("10.48550/arXiv.math.AG/0309136", "math/0309136"),
        ("see also 2020.12345 v2", None),  # month 20: no arXiv id
        ("version 1.2.3", None),
    ],
)
def test_arxiv_ids_are_read_in_any_usual_spelling(text: str, expected: str | None) -> None:
    assert clean_arxiv_id(text) == expected


words = st.lists(st.from_regex(r"[A-Za-z][a-z]{2,9}", fullmatch=True), min_size=2, max_size=12)


@given(words)
def test_a_title_keeps_its_key_through_case_braces_and_punctuation(title_words: list[str]) -> None:
    title = " ".join(title_words)
    braced = " ".join(f"{{{w.upper()}}}" if i % 2 else w.lower() for i, w in enumerate(title_words))
    assert title_key(title) == title_key(braced + ".") == title_key(f"\\emph{{{title}}}")


@given(st.lists(st.from_regex(r"[^\s]{1,8}", fullmatch=True), min_size=1, max_size=40))
@example(["a", "b", "a"])  # a word at two positions
def test_openalex_abstracts_are_rebuilt_word_for_word(text_words: list[str]) -> None:
    index: dict[str, list[int]] = {}
    for position, word in enumerate(text_words):
        index.setdefault(word, []).append(position)
    assert inverted_abstract(index) == " ".join(text_words)


PLAIN = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,;:!?-()'é", max_size=50)
paper = st.fixed_dictionaries(
    {
        "title": PLAIN.filter(lambda t: any(c.isalnum() for c in t)),
        "abstract": PLAIN.filter(lambda t: t.strip()),
        "year": st.integers(1950, 2030),
        "family": st.from_regex(r"[A-Z][a-zé]{1,9}", fullmatch=True),
    }
)


@given(st.lists(paper, min_size=1, max_size=5))
@example([{"title": "a", "abstract": "x.", "year": 2000, "family": "Ng"}])
def test_a_library_exported_three_ways_reads_back_as_itself(papers: list[dict]) -> None:
    import tempfile

    import bibtexparser
    import rispy
    from bibtexparser.model import Entry, Field

    bib = bibtexparser.Library()
    ris, csl = [], []
    for i, p in enumerate(papers):
        doi = f"10.5555/prop.{i}"
        bib.add(Entry("article", f"key{i}", [
            Field("title", p["title"]), Field("abstract", p["abstract"]),
            Field("author", f"{p['family']}, Ann"), Field("year", str(p["year"])),
            Field("doi", doi),
        ]))  # fmt: skip
        ris.append({"type_of_reference": "JOUR", "title": p["title"], "doi": doi,
                    "abstract": p["abstract"], "authors": [f"{p['family']}, Ann"],
                    "year": f"{p['year']}//"})  # fmt: skip
        csl.append({"id": f"item{i}", "type": "article-journal", "title": p["title"],
                    "abstract": p["abstract"], "author": [{"family": p["family"], "given": "Ann"}],
                    "issued": {"date-parts": [[p["year"]]]}, "DOI": doi.upper()})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "a.bib").write_text(bibtexparser.write_string(bib))
        Path(tmp, "b.ris").write_text(rispy.dumps(ris))
        Path(tmp, "c.json").write_text(json.dumps(csl))
        result = read_paths([tmp])
    assert result.skipped == [] and len(result.merged) == 2 * len(papers)
    got = by_id(result.papers)
    assert set(got) == {f"doi:10.5555/prop.{i}" for i in range(len(papers))}
    for i, p in enumerate(papers):
        read = got[f"doi:10.5555/prop.{i}"]
        assert read.abstract == " ".join(p["abstract"].split())
        assert (read.year, read.authors) == (p["year"], [f"Ann {p['family']}"])
        assert title_key(read.title) == title_key(p["title"])


# --- exports written by a helper who never saw this code, with what it expects ---------------
BLIND = ROOT / "tests" / "fixtures" / "library-blind"


def test_exports_written_blind_read_as_their_writer_expects() -> None:
    expected = json.loads((BLIND.parent / "library-blind.expected.json").read_text())
    result = read_paths([BLIND])

    def key(title: str) -> str:
        return "".join(c for c in title.casefold() if c.isalnum())

    got = {key(p.title): p for p in result.papers}
    assert sorted(got) == sorted(key(e["title"]) for e in expected["papers"])
    for want in expected["papers"]:
        paper = got[key(want["title"])]
        assert (paper.doi, paper.arxiv_id, paper.year) == (
            want["doi"],
            want["arxiv_id"],
            want["year"],
        ), paper
        assert want["first_author_family"] in paper.authors[0]
        assert paper.abstract.startswith(want["abstract_starts"].rstrip())
        assert not any(m in paper.title or m in paper.abstract for m in MARKUP), paper
    skipped = [(Path(p.file).name, p.line, p.reason) for p in result.skipped]
    for missing in expected["without_abstract"]:
        assert any(
            f == missing["file"] and r.startswith("no abstract") and missing["key_or_title"] in r
            for f, _, r in skipped
        ), missing
    for broken in expected["malformed"]:  # reported at its line, or at a line inside it
        assert any(
            f == broken["file"] and broken["line"] <= line <= broken["line"] + 4
            for f, line, _ in skipped
        ), broken


# --- the project's own format is read as before --------------------------------------------
def test_our_records_keep_their_ids_and_are_never_merged_by_title(tmp_path: Path) -> None:
    same = "Introduction to the Special Issue on Robustness"
    rows = [
        {"id": "p1", "title": same, "abstract": "Editorial one."},
        {"title": same, "abstract": "Editorial two."},
        {"title": same, "abstract": "Editorial three."},
        {"id": "mine-1", "title": "A", "abstract": "S2-like field.", "corpusId": 1},
        {"id": "mine-2", "title": "B", "abstract": "arXiv-like fields.", "categories": "cs.LG",
         "update_date": "2020-01-01", "decision": "Poster"},
    ]  # fmt: skip
    (tmp_path / "ours.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "ours.csv").write_text(
        "id,title,abstract,publication year,publication title\np9,T,An abstract.,2020,J\n"
    )
    for forced in (None, "jsonl"):
        result = read_paths([tmp_path / "ours.jsonl"], forced=forced)
        assert len(result.papers) == 5 and result.merged == []
        assert {"p1", "mine-1", "mine-2"} <= set(by_id(result.papers))
        assert by_id(result.papers)["mine-2"].decision == "Poster"
    assert list(by_id(read_paths([tmp_path / "ours.csv"]).papers)) == ["p9"]
    # a library record of one of our papers fills what ours lacks; ours keeps its id and text
    (tmp_path / "lib.bib").write_text(
        "@article{k, title={Deep Sets for Point Clouds}, abstract={A much longer abstract "
        "than ours, from the library.}, doi={10.5555/sets}}"
    )
    (tmp_path / "ours.jsonl").write_text(
        json.dumps({"id": "iclr-42", "title": "Deep Sets for Point Clouds", "abstract": "Ours."})
    )
    result = read_paths([tmp_path / "ours.jsonl", tmp_path / "lib.bib"])
    [paper] = result.papers
    assert (paper.paper_id, paper.abstract, paper.doi) == ("iclr-42", "Ours.", "10.5555/sets")


def test_records_linked_through_each_other_are_one_paper_in_any_order(tmp_path: Path) -> None:
    items = [
        {"type": "article", "title": "Published Title", "DOI": "10.5555/x",
         "issued": {"date-parts": [[2021]]}, "abstract": "Published."},
        {"type": "article", "title": "Preprint Title", "URL": "https://arxiv.org/abs/2101.00002",
         "issued": {"date-parts": [[2021]]}, "abstract": "Preprint, the longest abstract."},
        {"type": "article", "title": "Published Title", "DOI": "10.5555/x",
         "URL": "https://arxiv.org/pdf/2101.00002v2.pdf", "issued": {"date-parts": [[2021]]},
         "abstract": "Both ids."},
    ]  # fmt: skip
    for order in (items, items[::-1], [items[1], items[0], items[2]]):
        (tmp_path / "lib.json").write_text(json.dumps(order))
        [paper] = read_paths([tmp_path / "lib.json"]).papers
        assert (paper.paper_id, paper.arxiv_id) == ("doi:10.5555/x", "2101.00002")
        assert paper.abstract == "Preprint, the longest abstract."


def test_a_record_the_index_cannot_use_is_not_the_one_kept(tmp_path: Path) -> None:
    rows = [{"id": "p1", "doi": "10.5555/x", "abstract": "x" * 25_000},
            {"id": "p2", "doi": "10.5555/x", "abstract": "The real abstract."}]  # fmt: skip
    (tmp_path / "ours.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    assert [p.paper_id for p in read_paths([tmp_path / "ours.jsonl"]).papers] == ["p2"]


def unlabel(settings: Settings) -> None:
    """The index as written before each paper stored its identity keys: none, and no mark."""
    from store.chroma import IDENTITY_KEY
    from tests.conftest import raw_collection

    collection = raw_collection(settings)
    heads = collection.get(where={"chunk_index": 0}, include=[])["ids"]
    blank = {"key_doi": None, "key_arxiv": None, "key_title": None}
    collection.update(ids=heads, metadatas=[blank] * len(heads))
    collection.modify(metadata={**(collection.metadata or {}), IDENTITY_KEY: ""})


def indexed_then_library(settings: Settings, ours: list[dict], library: str) -> Path:
    """Our records ingested; the BibTeX file of ``library`` (not ingested yet)."""
    from ingest.pipeline import ingest

    (settings.data_dir.parent / "ours.jsonl").write_text("\n".join(map(json.dumps, ours)))
    ingest([settings.data_dir.parent / "ours.jsonl"], settings)
    bib = settings.data_dir.parent / "lib.bib"
    bib.write_text(library)
    return bib


def test_an_indexed_paper_is_adopted_only_when_nothing_disagrees(settings: Settings) -> None:
    from app.engine.service import QAService
    from ingest.pipeline import ingest
    from store.index import Index

    bib = indexed_then_library(
        settings,
        [
            {
                "id": "p-old",
                "title": "Deep Learning for Symbolic Mathematics",
                "decision": "Oral",
                "doi": "10.5555/conference",
                "abstract": "The conference paper on symbolic maths.",
            },
            {
                "id": "p2",
                "title": "Second",
                "doi": "10.5555/second",
                "arxiv_id": "2101.00002",
                "abstract": "Second paper, first version.",
            },
        ],
        (
            "@article{j, title={Deep Learning for Symbolic Mathematics}, doi={10.5555/journal},\n"
            "  abstract={A journal paper with the title of another paper.}}\n"
            "@article{d, title={Published Title Of The Second Paper}, doi={10.5555/second},\n"
            "  abstract={Second paper, published version.}}\n"
            "@misc{a, title={Preprint Title Of The Second Paper}, eprint={2101.00002},\n"
            "  abstract={Second paper, preprint version.}}\n"
        ),
    )
    report = ingest([bib], settings)
    reasons = [p.reason for p in report.merged]
    assert reasons[0] == "same paper (by DOI 10.5555/second) as indexed paper 'p2'; updated it"
    assert "which " in reasons[1] and "not read twice" in reasons[1] and len(reasons) == 2
    assert Index(settings).stats().papers == 3  # the journal paper is a paper of its own
    service = QAService(settings)
    assert service.paper("p-old").abstract == "The conference paper on symbolic maths."
    second = service.paper("p2")
    assert (second.abstract, second.arxiv_id) == ("Second paper, published version.", "2101.00002")


def test_bibtex_authors_whatever_the_field_case_and_ris_records_that_run_on(
    tmp_path: Path,
) -> None:
    (tmp_path / "wos.bib").write_text(
        "@Article{ ISI:1,\nAuthor = {Smith, John and\n   Doe, Jane and\n   {World Health "
        "Organization} and others},\nTitle = {{A} Title},\nAbstract = {Text.},\nYear = {2019},\n}"
    )
    [paper] = read_paths([tmp_path / "wos.bib"]).papers
    assert paper.authors == ["John Smith", "Jane Doe", "World Health Organization"]
    (tmp_path / "run-on.ris").write_text(
        "TY  - JOUR\nTI  - First title\nAB  - Abstract one.\n\n2.\nTY  - JOUR\nTI  - Second\n"
        "AU  - Doe, Jane\n@@@ garbage ###\nAB  - Abstract two,\nwrapped onto a second line.\n"
        "ER  - \n"
    )
    result = read_paths([tmp_path / "run-on.ris"])
    assert [(p.title, p.abstract) for p in result.papers] == [
        ("First title", "Abstract one."),
        ("Second", "Abstract two, wrapped onto a second line."),
    ]
    assert [(p.line, p.reason[:14]) for p in result.skipped] == [(9, "not a RIS line")]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = [
    "id", "title", "abstract", "author", "authors", "issued", "container-title", "DOI", "URL",
    "doi", "versions", "authors_parsed", "categories", "abstract_inverted_index", "authorships",
    "primary_location", "locations", "keywords", "paperId", "externalIds", "venue", "year",
    "publicationVenue", "s2FieldsOfStudy", "number", "note", "publication_year", "host_venue",
]  # fmt: skip


@given(
    st.sampled_from(["csl-json", "arxiv", "openalex", "s2", "jsonl"]),
    st.lists(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=8), min_size=1, max_size=4),
)
@example(
    "openalex",
    [{"authorships": "x", "primary_location": [1], "abstract_inverted_index": {"a": "b"}}],
)
def test_any_json_record_in_any_schema_is_read_or_reported_never_raises(
    schema: str, records: list[dict]
) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "r.jsonl")
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken\n")
        result = read_paths([path], forced=schema)
    assert len(result.papers) + len(result.skipped) + len(result.merged) == len(records) + 1
    assert all(p.abstract.strip() for p in result.papers)


def test_a_library_import_looks_its_papers_up_and_labels_an_older_index_once(
    settings: Settings,
) -> None:
    """Which indexed paper a library record is gets looked up by its keys (DOI, arXiv id,
    title) on the papers' first chunks, not by reading the whole index; an index written before
    the keys were stored is labelled once, then looked up like any other."""
    from ingest.pipeline import ingest
    from store.chroma import ChunkCollection
    from store.index import Index

    bib = indexed_then_library(
        settings,
        [
            {
                "id": "p-doi",
                "title": "Graph Networks",
                "doi": "https://doi.org/10.5555/GN.1",
                "abstract": "We study graph networks.",
            },
            {
                "id": "p-arxiv",
                "title": "Sparse Kernels",
                "arxiv_id": "arXiv:2101.00002v3",
                "abstract": "We study sparse kernels.",
            },
            {
                "id": "t0123456789abcdef",
                "title": "{Bandits} With Priors, Revisited",
                "abstract": "We study bandits with priors.",
            },
            {  # the same title, written later, under an id of ours: not a library's paper
                "id": "p-bandits",
                "title": "Bandits with Priors Revisited",
                "doi": "10.5555/bandits-journal",
                "abstract": "Bandits with priors, in a journal.",
            },
        ]
        + [
            {"id": f"other-{i}", "title": f"Another paper number {i}", "abstract": "Filler."}
            for i in range(20)
        ],
        (
            "@article{a, title={Graph Networks in Print}, doi={10.5555/gn.1},\n"
            "  abstract={Graph networks, the journal version.}}\n"
            "@misc{b, title={Sparse Kernels}, eprint={2101.00002}, archivePrefix={arXiv},\n"
            "  abstract={Sparse kernels, the preprint.}}\n"
            "@inproceedings{c, title={Bandits with priors: revisited},\n"
            "  abstract={Bandits with priors, the proceedings version.}}\n"
            "@article{d, title={A Paper The Index Has Not Seen}, abstract={Something new.}}\n"
            "@article{e, title={Bandit Priors in a Journal}, doi={10.5555/bandits-journal},\n"
            "  abstract={Bandits with priors, the journal article.}}\n"
        ),
    )
    expected = {
        ("p-doi", "DOI 10.5555/gn.1"),
        ("p-arxiv", "arXiv id 2101.00002"),
        ("t0123456789abcdef", "title"),
        ("p-bandits", "DOI 10.5555/bandits-journal"),
    }

    def adopted(report: IngestReport) -> set[tuple[str, str]]:
        found = set()
        for problem in report.merged:
            by = problem.reason.split("(by ", 1)[1].split(")", 1)[0]
            found.add((problem.reason.split("indexed paper '", 1)[1].split("'")[0], by))
        return found

    scan = ChunkCollection.scan
    with (
        mock.patch.object(ChunkCollection, "scan", side_effect=AssertionError("a scan")),
        mock.patch.object(ChunkCollection, "heads", side_effect=AssertionError("a scan")),
        mock.patch("store.chroma._PAPERS_PER_GET", 1),  # a key a lookup: any order of papers
    ):
        first = ingest([bib], settings)
    assert adopted(first) == expected and (first.added, first.papers) == (1, 5)
    papers = Index(settings).stats().papers
    assert papers == 24 + 1

    unlabel(settings)  # an index as written before the keys were stored
    bib.write_text(bib.read_text().replace("the journal version", "the journal version, v2"))
    with mock.patch.object(ChunkCollection, "scan", autospec=True, side_effect=scan) as labels:
        seen: list[tuple[str, int, int]] = []
        # labels it (one read of the index, the progress shown), then looks up
        again = ingest([bib], settings, progress=lambda *step: seen.append(step))
        assert labels.call_count == 1
        assert ("labelling indexed papers (once)", papers, papers) in seen
        assert adopted(again) == expected
        assert (again.added, again.updated) == (0, 1)
        third = ingest([bib], settings)
        assert labels.call_count == 1 and third.added == third.updated == 0
    assert Index(settings).stats().papers == papers


def test_a_field_dropped_from_a_paper_is_dropped_from_the_index(settings: Settings) -> None:
    """Chroma merges a write's metadata into the old: a venue, DOI or decision a paper no
    longer has must not survive its update (nor be found by a filter)."""
    from app.engine.service import QAService
    from core.models import Filters, chunk_id
    from ingest.pipeline import ingest
    from tests.conftest import raw_collection

    corpus = settings.data_dir.parent / "c.jsonl"
    full = {
        "id": "p1", "title": "Robust Graph Attention", "venue": "ICLR", "decision": "Oral",
        "doi": "10.5555/rga", "year": 2021, "abstract": "We make graph attention robust.",
    }  # fmt: skip
    corpus.write_text(json.dumps(full))
    ingest([corpus], settings)
    bare = {k: v for k, v in full.items() if k not in {"venue", "decision", "doi", "year"}}
    corpus.write_text(json.dumps(bare))
    assert ingest([corpus], settings).updated == 1
    service = QAService(settings)
    paper = service.paper("p1")
    assert (paper.venue, paper.decision, paper.doi, paper.year) == (None, None, None, None)
    got = raw_collection(settings).get(ids=[chunk_id("p1", 0)], include=["metadatas"])
    stored = (got["metadatas"] or [{}])[0]
    assert stored["title"] and not {"venue", "venue_key", "doi", "key_doi", "year"} & set(stored)
    filtered = service.ask("How is graph attention made robust?", filters=Filters(venues=["ICLR"]))
    assert filtered.abstained and not filtered.citations
    assert service.ask("How is graph attention made robust?").citations


LABEL_KILLER = """
import os, signal, sys
import store.chroma as chroma
from core.settings import get_settings
from ingest.pipeline import ingest

at, calls = int(sys.argv[1]), []
labels, mark = chroma.identity_metadata, chroma.ChunkCollection._set
chroma.ChunkCollection._batches = lambda self, items: (
    items[i : i + 10] for i in range(0, len(items), 10)
)

def counted(fn):
    def run(*args):
        calls.append(fn.__name__)
        if len(calls) == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*args)
    return run

chroma.identity_metadata = counted(labels)  # once a paper, before its batch is written
chroma.ChunkCollection._set = counted(mark)  # the collection marked as labelled
ingest([sys.argv[2]], get_settings())
print(len(calls))
"""


@pytest.mark.slow
def test_a_kill_while_an_older_index_is_labelled_leaves_it_to_be_labelled_again(
    settings: Settings, tmp_path: Path
) -> None:
    """Labelling an older index is not one transaction: killed at any batch (or before the
    collection is marked), the index opens, and the next library import labels it again and
    finds every paper it holds."""
    from chromadb.api.shared_system_client import SharedSystemClient

    from ingest.pipeline import ingest
    from store.index import Index
    from tests.conftest import bm25_ids, chroma_ids, raw_collection

    rows = [
        {"id": f"p{i}", "title": f"Paper number {i} of the lab", "doi": f"10.5555/lab.{i}",
         "abstract": f"We report finding number {i}."}
        for i in range(25)
    ]  # fmt: skip
    (tmp_path / "ours.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ingest([tmp_path / "ours.jsonl"], settings)
    unlabel(settings)
    bib = tmp_path / "lib.bib"
    bib.write_text("".join(
        f"@article{{k{r['id']}, title={{{r['title']}}}, doi={{{r['doi']}}},\n"
        f"  abstract={{{r['abstract']}}}}}\n"
        for r in rows
    ))  # fmt: skip
    pristine = tmp_path / "pristine"
    SharedSystemClient.clear_system_cache()
    shutil.copytree(settings.data_dir, pristine)
    env = {**os.environ, "AQA_DATA_DIR": str(settings.data_dir), "HF_HUB_OFFLINE": "1"}

    def child(at: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", LABEL_KILLER, str(at), str(bib)],
            env=env, cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip

    whole = child(0)
    assert whole.returncode == 0, whole.stderr[-2000:]
    # 25 papers in three batches, the mark, then the ingest's write (its two generation marks)
    assert int(whole.stdout) == 25 + 1 + 2
    for at in (1, 11, 12, 21, 26):
        SharedSystemClient.clear_system_cache()
        shutil.rmtree(settings.data_dir)
        shutil.copytree(pristine, settings.data_dir)
        assert child(at).returncode == -9, f"call {at}: not killed"
        SharedSystemClient.clear_system_cache()  # open the index as a new process would
        assert bm25_ids(settings) == chroma_ids(settings), at
        again = ingest([bib], settings)
        assert (len(again.merged), again.added) == (25, 0), at  # every paper found by its DOI
        assert Index(settings).stats().papers == 25, at
        heads = raw_collection(settings).get(where={"chunk_index": 0}, include=["metadatas"])
        assert sorted(str(m["key_doi"]) for m in heads["metadatas"] or []) == sorted(
            r["doi"] for r in rows
        ), at


def test_labelling_that_a_write_overlaps_is_done_again(settings: Settings, tmp_path: Path) -> None:
    """Labelling an older index is no write session: when another write ends while it runs
    (it may have changed a paper whose keys were read before), the index is not marked as
    labelled, and the next library import labels it again."""
    from ingest.pipeline import ingest
    from store.chroma import ChunkCollection
    from store.index import Index

    bib = indexed_then_library(
        settings,
        [{"id": "p1", "title": "Graph Networks", "doi": "10.5555/gn", "abstract": "Graphs."}],
        "@article{a, title={Graph Networks}, doi={10.5555/gn}, abstract={Graphs, revised.}}\n",
    )
    unlabel(settings)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "p2", "title": "Another", "abstract": "Another one."}))
    identify = ChunkCollection.identify

    def overlapped(self: ChunkCollection, *args: object, **kwargs: object) -> None:
        identify(self, *args, **kwargs)  # type: ignore[arg-type]
        ingest([other], settings)  # another writer, meanwhile

    with mock.patch.object(ChunkCollection, "identify", overlapped):
        first = ingest([bib], settings)
    assert [p.reason for p in first.merged] == [
        "same paper (by DOI 10.5555/gn) as indexed paper 'p1'; updated it"
    ]
    chunks = Index(settings).chunks()
    assert chunks is not None and not chunks.identified
    second = ingest([bib], settings)
    assert len(second.merged) == 1 and second.added == second.updated == 0
    assert chunks.identified and Index(settings).stats().papers == 2


@pytest.mark.parametrize("forced", ["zotero-csv", "csv", "sample", "jsonl"])
def test_a_report_on_bytes_that_are_not_utf8_is_written_as_json(
    tmp_path: Path, forced: str
) -> None:
    # found by schemathesis: a PNG uploaded as Zotero CSV made POST /ingest fail with a 500,
    # its report quoting the undecodable header as surrogates that JSON cannot hold
    path = tmp_path / "files.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xc7\xd8IHDR,abc\r\n\xe9\xff,x\r\n")
    result = read_paths([path], forced=forced)  # type: ignore[arg-type]
    problems = [*result.skipped, *result.warnings]
    assert problems and all(p.file == str(path) and p.line for p in problems)
    report = IngestReport(skipped=result.skipped, warnings=result.warnings).model_dump_json()
    if forced.endswith("csv"):  # the header it could not use, its bytes shown as escapes
        assert "(columns: \\\\x89png)" in report

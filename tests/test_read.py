"""Reading every supported format, and every kind of bad input, with file and line."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

from ingest.read import read_paths
from tests.conftest import SAMPLE

RECORD = {
    "id": "p1",
    "title": "Sparse Attention for Long Documents",
    "abstract": "We propose a sparse attention scheme. It cuts memory by 40\\%.",
    "authors": ["Ada Lovelace", "Alan Turing"],
    "year": 2021,
    "venue": "ICML",
    "url": "https://example.org/p1",
    "keywords": ["attention", "efficiency"],
    "decision": "Accept",
}


def test_sample_format_gives_venue_year_and_derived_titles() -> None:
    result = read_paths([SAMPLE])
    assert result.files == 3
    assert result.skipped == []
    assert len(result.papers) == 57
    first = result.papers[0]
    assert (first.venue, first.year) == ("ICLR", 2023)
    assert {p.year for p in result.papers} == {2023, 2024}
    assert first.title_derived and first.title.startswith("We develop and analyze DASHA")
    assert len(first.title) <= 91
    assert first.paper_id.startswith("h") and first.source.endswith(":3")
    assert len({p.paper_id for p in result.papers}) == 57


def test_jsonl_json_csv_and_gzip_keep_all_fields(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(RECORD) + "\n")
    second = {**RECORD, "id": "p2"}
    (tmp_path / "b.json").write_text(json.dumps([second], indent=2))
    with (tmp_path / "c.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "Title", "abstract", "authors", "year", "venue", "keywords"])
        writer.writerow(
            ["p3", RECORD["title"], RECORD["abstract"], "A. B; C. D", "2020", "NeurIPS", "x; y"]
        )
    with gzip.open(tmp_path / "d.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({**RECORD, "id": "p4"}) + "\n")
    result = read_paths([tmp_path])
    assert result.skipped == []
    by_id = {p.paper_id: p for p in result.papers}
    assert sorted(by_id) == ["p1", "p2", "p3", "p4"]
    p1 = by_id["p1"]
    assert p1.authors == ["Ada Lovelace", "Alan Turing"]
    assert (p1.year, p1.venue, p1.decision, p1.url) == (2021, "ICML", "Accept", RECORD["url"])
    assert p1.keywords == ["attention", "efficiency"] and not p1.title_derived
    assert "40\\%" in p1.abstract  # stored text keeps the LaTeX
    assert by_id["p3"].authors == ["A. B", "C. D"] and by_id["p3"].year == 2020
    assert by_id["p2"].source.endswith("b.json:2")


def test_bad_inputs_are_reported_with_file_and_line_and_the_rest_is_read(tmp_path: Path) -> None:
    good = json.dumps(RECORD)
    (tmp_path / "mixed.jsonl").write_text(
        "\n".join(
            [
                good,
                "{not json",
                json.dumps({"id": "x", "title": "no abstract"}),
                json.dumps({**RECORD, "id": "p5", "year": "n/a"}),
                "[1, 2]",
            ]
        )
        + "\n"
    )
    (tmp_path / "latin1.jsonl").write_bytes(
        json.dumps({**RECORD, "id": "p6"}).encode()
        + b"\n"
        + '{"id": "p7", "abstract": "Caf\u00e9 au lait effect."}'.encode("latin-1")
        + b"\n"
    )
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "blob.jsonl").write_bytes(b"\x00\x01\x02binary\x00")
    (tmp_path / "notes.md").write_text("# not a corpus")
    result = read_paths([tmp_path, tmp_path / "missing.csv"])
    reasons = {(Path(p.file).name, p.line): p.reason for p in result.skipped}
    assert "malformed JSON" in reasons[("mixed.jsonl", 2)]
    assert reasons[("mixed.jsonl", 3)] == "no abstract"
    assert "expected an object" in reasons[("mixed.jsonl", 5)]
    assert reasons[("empty.jsonl", None)] == "empty file"
    assert "binary" in reasons[("blob.jsonl", None)]
    assert "unsupported file type" in reasons[("notes.md", None)]
    assert reasons[("missing.csv", None)] == "no such file or directory"
    assert sorted(p.paper_id for p in result.papers) == ["p1", "p5", "p6", "p7"]
    warned = {(Path(w.file).name, w.line): w.reason for w in result.warnings}
    assert set(warned) == {("mixed.jsonl", 4), ("latin1.jsonl", 2)}
    assert "not valid UTF-8; read as Windows-1252" in warned[("latin1.jsonl", 2)]
    assert next(p for p in result.papers if p.paper_id == "p7").abstract == "Café au lait effect."
    assert next(p for p in result.papers if p.paper_id == "p5").year is None


def test_duplicates_keep_the_first_copy(tmp_path: Path) -> None:
    lines = [json.dumps(RECORD), json.dumps({**RECORD, "abstract": "Other text."})]
    no_id = {"abstract": "Same words twice."}
    lines += [json.dumps(no_id), json.dumps({"abstract": "same   WORDS twice."})]
    (tmp_path / "dups.jsonl").write_text("\n".join(lines))
    result = read_paths([tmp_path / "dups.jsonl"])
    assert len(result.papers) == 2
    assert [p.line for p in result.skipped] == [2, 4]
    assert all("duplicate" in p.reason for p in result.skipped)


def test_json_array_with_a_broken_element_keeps_what_came_before(tmp_path: Path) -> None:
    text = "[\n" + json.dumps(RECORD) + ',\n{"abstract": oops}\n]'
    (tmp_path / "broken.json").write_text(text)
    result = read_paths([tmp_path / "broken.json"])
    assert [p.paper_id for p in result.papers] == ["p1"]
    assert result.skipped[0].line == 3 and "malformed JSON" in result.skipped[0].reason


def test_a_unicode_line_separator_inside_a_record_does_not_split_it(tmp_path: Path) -> None:
    # U+2028 occurs in real abstracts (ml-abstracts.jsonl.gz line 17090); only \n ends a record
    text = json.dumps({**RECORD, "abstract": "One\u2028two."}, ensure_ascii=False) + "\r\n"
    (tmp_path / "ls.jsonl").write_text(text + json.dumps({**RECORD, "id": "p2"}) + "\n")
    result = read_paths([tmp_path / "ls.jsonl"])
    assert result.skipped == [] and [p.paper_id for p in result.papers] == ["p1", "p2"]
    assert result.papers[0].abstract == "One\u2028two."

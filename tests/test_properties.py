"""Property-based tests (hypothesis): the readers, the chunker and the citation parser hold their
promises for any input, not only the examples we thought of."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.providers.wording import check_citations
from core.models import Source
from core.tokens import count_tokens
from ingest.chunk import split_spans
from ingest.read import read_paths

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text as people paste it: any printable character, including non-Latin scripts, quotes,
# brackets and LaTeX, plus the line separators that once split records (U+2028).
TEXT = st.lists(
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs", "Cc"]) | st.sampled_from("\u2028 é量"),
        min_size=1,
        max_size=40,
    )
    | st.sampled_from([". ", "? ", "\\%", "$x$", "[3]", "e.g. ", "\n\n"]),
    min_size=1,
    max_size=25,
).map("".join)
WORDS = st.text(alphabet="abcdefghij XYZ.,;:!?-()[]0123456789'\"é量", min_size=1, max_size=60)


def norm(text: str) -> str:
    return " ".join(text.split())


record = st.fixed_dictionaries(
    {"id": WORDS.filter(lambda s: norm(s) != ""), "abstract": TEXT.filter(lambda s: s.strip())},
    optional={"title": WORDS, "year": st.integers(1900, 2100) | st.none()},
)


def unique_by_id(records: list[dict[str, object]]) -> list[dict[str, object]]:
    seen: dict[str, dict[str, object]] = {}
    for r in records:
        seen.setdefault(norm(str(r["id"])), r)
    return list(seen.values())


@PROPERTY
@given(st.lists(record, min_size=1, max_size=8).map(unique_by_id), st.data())
def test_jsonl_and_csv_read_back_every_record_and_name_bad_lines(
    records: list[dict[str, object]], data: st.DataObject
) -> None:
    garbage = data.draw(st.lists(st.integers(0, len(records)), max_size=3))
    lines: list[str] = []
    bad_lines: list[int] = []
    for i, r in enumerate(records):
        if i in garbage:
            lines.append("{broken " + str(i))
            bad_lines.append(len(lines))
        lines.append(json.dumps(r, ensure_ascii=data.draw(st.booleans())))
    with TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "r.jsonl"
        jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=["id", "title", "year", "abstract"])
        writer.writeheader()
        writer.writerows(records)
        table = Path(tmp) / "r.csv"
        table.write_text(buffer.getvalue(), encoding="utf-8")
        for path in (jsonl, table):
            result = read_paths([path])
            got = {p.paper_id: p for p in result.papers}
            assert set(got) == {norm(str(r["id"])) for r in records}, path.suffix
            for r in records:
                paper = got[norm(str(r["id"]))]
                assert paper.abstract == str(r["abstract"]).strip()
                if r.get("year") is not None:
                    assert paper.year == r["year"]
                assert paper.source.startswith(str(path) + ":")
            if path == jsonl:
                assert sorted(p.line for p in result.skipped) == bad_lines
                assert all("malformed JSON" in p.reason for p in result.skipped)


@PROPERTY
@given(
    st.lists(WORDS | TEXT, min_size=1, max_size=30).map(" ".join),
    st.integers(8, 300),
    st.integers(0, 64),
)
def test_chunk_spans_cover_the_text_in_order_within_the_limit(
    text: str, max_tokens: int, overlap: int
) -> None:
    spans = split_spans(text, max_tokens, overlap)
    covered = [False] * len(text)
    for start, end in spans:
        assert 0 <= start < end <= len(text)
        assert count_tokens(text[start:end]) <= max_tokens, (text[start:end], max_tokens)
        for i in range(start, end):
            covered[i] = True
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace()), "text left out"
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    assert starts == sorted(starts) and ends == sorted(ends)
    assert len(set(starts)) == len(starts), "a chunk repeats another"


def source(marker: int) -> Source:
    return Source(
        marker=marker,
        paper_id=f"paper-{marker}",
        title=f"Title {marker}",
        text=f"Sentence one of paper {marker}. Sentence two about topic {marker}.",
        chunk_ids=[f"paper-{marker}:0"],
        score=0.5,
        rank=marker,
    )


# What a model may write around citations: markers of any size, nested, glued or unbalanced,
# inside LaTeX, with huge numbers; a marker-shaped group built from the strategy's own parts.
MARKERS = st.lists(st.integers(-3, 40) | st.integers(10**20, 10**25), min_size=1, max_size=4).map(
    lambda ns: "[" + ", ".join(map(str, ns)) + "]"
)
CITING_TEXT = st.recursive(
    WORDS
    | MARKERS
    | st.sampled_from([". ", "! ", "? ", "[", "]", "[]", "[ 2 ]", "[1;3]", "[1][2]", "$", "}"])
    | st.sampled_from(["\\cite{", "0", "[007]", "[" + "9" * 5000 + "]"]),
    lambda inner: (
        st.lists(inner, min_size=1, max_size=6).map("".join)
        | inner.map(lambda t: "[" + t + "]")
        | inner.map(lambda t: "$" + t + "$")
    ),
    max_leaves=30,
)


@settings(PROPERTY, max_examples=600)
@given(st.lists(CITING_TEXT, max_size=12).map("".join), st.integers(0, 8))
@example("[[0]0]", 0)  # found on a fresh machine: dropping [0] glued "[" and "0]" into "[0]"
@example("[[0]1]", 1)
@example("[[[0]0]0]", 2)
@example("[" + "9" * 5000 + "]", 3)
def test_citations_never_point_at_a_missing_source(text: str, n_sources: int) -> None:
    sources = [source(i) for i in range(1, n_sources + 1)]
    checked = check_citations(text, sources)
    real = {s.marker: s.paper_id for s in sources}
    for citation in checked.citations:
        assert real[citation.marker] == citation.paper_id
    groups = re.findall(r"\[(\s*\d+\s*(?:[,;]\s*\d+\s*)*)\]", checked.text)  # the parser's grammar
    left = {n.strip().lstrip("0") or "0" for g in groups for n in re.split(r"[,;]", g)}
    markers = {str(m) for m in real}
    assert left <= markers, f"a marker to a missing source survived: {checked.text!r}"
    assert left == {str(c.marker) for c in checked.citations}
    assert not set(checked.invalid) & markers
    assert check_citations(checked.text, sources).text == checked.text, "checking twice changes it"

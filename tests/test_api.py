"""The HTTP API against a real uvicorn server on loopback, with a real HTTP client (httpx),
streaming included."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.models import Answer, IndexStats, IngestReport, Paper, Source
from ingest.read import read_paths
from tests.conftest import ROOT, SAMPLE, api_server, assert_citations_real, paper_id_containing

pytestmark = [pytest.mark.slow, pytest.mark.server]
TOKEN = "api-test-token"


@pytest.fixture(scope="module")
def api(index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    log = tmp_path_factory.mktemp("api-log") / "serve.log"
    with (
        api_server(index, log, AQA_API_TOKEN=TOKEN, AQA_API_MAX_UPLOAD_MB="1") as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        yield client


def test_ask_returns_the_python_apis_answer(api: httpx.Client, sample_service: object) -> None:
    response = api.post("/ask", json={"question": "What is DASHA?", "k": 3})
    assert response.status_code == 200, response.text
    answer = Answer.model_validate(response.json())
    assert not answer.abstained and "DASHA" in answer.answer
    assert answer.citations[0].paper_id == paper_id_containing("We develop and analyze DASHA")
    assert_citations_real(answer)
    same = sample_service.ask("What is DASHA?", k=3)  # type: ignore[attr-defined]
    assert (answer.answer, answer.citations) == (same.answer, same.citations)
    assert response.json()["filters_applied"] == "none"  # the derived fields are sent too
    assert [s["rank"] for s in response.json()["sources"]] == [1, 2, 3]


def test_ask_streams_server_sent_events_then_the_answer(api: httpx.Client) -> None:
    events: list[tuple[str, str]] = []
    body = {"question": "Which papers study federated learning?", "filters": {"year_from": 2024}}
    with api.stream("POST", "/ask/stream", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((kind, line.split(":", 1)[1].strip()))
    kinds = [k for k, _ in events]
    assert kinds[-1] == "answer" and set(kinds[:-1]) == {"piece"} and len(kinds) > 2
    answer = Answer.model_validate_json(events[-1][1])
    assert answer.filters.year_from == 2024 and all(s.year == 2024 for s in answer.sources)
    streamed = "".join(json.loads(data) for _, data in events[:-1])
    assert answer.answer.split(" [")[0] in streamed
    assert_citations_real(answer)


def test_filters_are_one_record_under_one_name_as_answers_return_them(api: httpx.Client) -> None:
    """A request's ``filters`` is the same `Filters` record (the same schema) as an answer's:
    what one answer applied can be sent back as the next request's filters."""
    schemas = api.get("/openapi.json").json()["components"]["schemas"]
    asked = schemas["AskRequest"]["properties"]["filters"]
    assert asked["$ref"] == "#/components/schemas/Filters"
    assert {"year_from", "year_to", "venues", "decisions", "authors"} <= set(
        schemas["Filters"]["properties"]
    )
    first = api.post("/ask", json={"question": "ICLR 2024 papers on equivariant networks"})
    applied = first.json()["filters"]
    assert applied["venues"] == ["ICLR"] and applied["year_from"] == 2024
    again = api.post("/search", json={"question": "equivariant networks", "filters": applied})
    assert again.status_code == 200 and again.json()
    assert all(s["year"] == 2024 and s["venue"] == "ICLR" for s in again.json())


def test_search_paper_related_and_stats(api: httpx.Client) -> None:
    found = api.post("/search", json={"question": "dynamic time warping", "k": 4})
    sources = [Source.model_validate(s) for s in found.json()]
    assert len(sources) == 4 and all(s.relevance > 0 for s in sources)
    first = sources[0].paper_id
    assert first == paper_id_containing("DecDTW")

    paper = Paper.model_validate(api.get(f"/papers/{first}").json())
    original = next(p for p in read_paths([SAMPLE]).papers if p.paper_id == first)
    assert " ".join(paper.abstract.split()) == " ".join(original.abstract.split())
    assert (paper.year, paper.venue) == (original.year, original.venue)

    related = [Source.model_validate(s) for s in api.get(f"/papers/{first}/related?k=3").json()]
    assert len(related) == 3 and first not in {s.paper_id for s in related}

    stats = IndexStats.model_validate(api.get("/stats").json())
    assert stats.papers >= 57 and stats.venues["ICLR"] >= 57
    assert "/ask/stream" in api.get("/openapi.json").json()["paths"]
    assert api.get("/docs").status_code == 200


def test_bad_requests_get_4xx_errors_that_name_the_problem(api: httpx.Client) -> None:
    unknown = api.post("/ask", json={"question": "What is DASHA?", "top": 3})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "top"]
    long = api.post("/ask", json={"question": "why " * 600})
    assert long.status_code == 422 and "AQA_MAX_QUESTION_CHARS" in long.text
    assert long.json()["detail"][0]["loc"] == ["body", "question"]
    blank = api.post("/ask", json={"question": "   "})
    assert blank.status_code == 400 and "empty" in blank.json()["detail"]
    assert blank.json()["error"] == "bad_input"
    boolean = api.post("/search", json={"question": "x", "filters": {"year_to": False}})
    assert boolean.status_code == 422
    assert boolean.json()["detail"][0]["loc"] == ["body", "filters", "year_to"]
    singular = api.post("/search", json={"question": "x", "filters": {"venue": ["ICLR"]}})
    assert singular.status_code == 422  # one name per filter kind: venues, as everywhere
    assert singular.json()["detail"][0]["loc"] == ["body", "filters", "venue"]
    wrong = api.post("/ask", json={"question": "x", "k": 0})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "k"]
    missing = api.get("/papers/no-such-paper")
    assert missing.status_code == 404 and "No paper with id" in missing.json()["detail"]
    assert missing.json()["error"] == "paper_not_found"


def test_ingest_needs_the_token_names_bad_lines_and_adds_nothing_twice(
    api: httpx.Client, tmp_path: Path
) -> None:
    corpus = tmp_path / "mine.jsonl"
    record = {"id": "api-1", "title": "Quokka search", "abstract": "We propose QUOKKANET, a "
              "search method tested over HTTP. It finds papers fast."}  # fmt: skip
    corpus.write_text(json.dumps(record) + "\n{not json\n")
    before = api.get("/stats").json()["chunks"]
    upload = {"files": ("mine.jsonl", corpus.read_bytes(), "application/json")}
    refused = api.post("/ingest", files=upload)
    assert refused.status_code == 401 and "AQA_API_TOKEN" in refused.json()["detail"]
    assert refused.json()["error"] == "unauthorized"
    wrong = api.post("/ingest", files=upload, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # an empty format is no format (the schema's enum refuses it): named, and nothing read
    blank = api.post("/ingest", files=upload, data={"format": ""}, headers=auth)
    assert blank.status_code == 422 and blank.json()["detail"][0]["loc"] == ["body", "format"]
    assert "format is empty" in blank.text and api.get("/stats").json()["chunks"] == before
    report = IngestReport.model_validate(api.post("/ingest", files=upload, headers=auth).json())
    assert (report.papers, report.added) == (1, 1)
    assert [(p.file, p.line) for p in report.skipped] == [("mine.jsonl", 2)]
    again = IngestReport.model_validate(api.post("/ingest", files=upload, headers=auth).json())
    assert again.added == 0 and again.unchanged == 1
    assert api.get("/stats").json()["chunks"] == before + 1
    answer = Answer.model_validate(api.post("/ask", json={"question": "What is QUOKKANET?"}).json())
    assert answer.citations[0].paper_id == "api-1"

    big = {"files": ("big.jsonl", b"x" * 1_200_000, "application/json")}
    too_big = api.post("/ingest", files=big, headers=auth)
    assert too_big.status_code == 413 and "AQA_API_MAX_UPLOAD_MB" in too_big.text
    assert too_big.json()["error"] == "body_too_large"
    assert api.get("/stats").json()["chunks"] == before + 1


def test_beyond_loopback_without_a_token_ingest_is_off(index: Path, tmp_path: Path) -> None:
    with (
        api_server(index, tmp_path / "serve.log", "--host", "0.0.0.0") as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        assert client.post("/ask", json={"question": "What is DASHA?"}).status_code == 200
        upload = {"files": ("x.jsonl", b'{"id": "x", "abstract": "Some text here."}\n')}
        refused = client.post("/ingest", files=upload)
        assert refused.status_code == 403 and "AQA_API_TOKEN" in refused.json()["detail"]
        assert refused.json()["error"] == "ingest_off"
        rating = {"rating": "up", "question": "What is DASHA?"}
        assert client.post("/feedback", json=rating).status_code == 403  # a write, too
    assert "without AQA_API_TOKEN" in (tmp_path / "serve.log").read_text()


def test_ingest_reads_a_reference_library_and_links_its_papers(
    api: httpx.Client, tmp_path: Path
) -> None:
    library = ROOT / "tests" / "fixtures" / "library"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    upload = [
        ("files", ("my library.bib", (library / "zotero-export.bib").read_bytes(), "text/plain")),
        ("files", ("export.txt", (library / "endnote.ris").read_bytes(), "text/plain")),
    ]
    refused = api.post("/ingest", files=upload, data={"format": "endnote"}, headers=auth)
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "format"]
    report = IngestReport.model_validate(api.post("/ingest", files=upload[:1], headers=auth).json())
    assert report.formats == {"my library.bib": "BibTeX"} and report.papers == 4
    assert ("my library.bib", 63) in [(p.file, p.line) for p in report.skipped]
    forced = api.post("/ingest", files=upload[1:], data={"format": "ris"}, headers=auth)
    assert IngestReport.model_validate(forced.json()).formats == {"export.txt": "RIS"}
    paper = api.get("/papers/doi:10.5555/colt.2014.rcb").json()
    assert paper["doi_url"] == "https://doi.org/10.5555/colt.2014.rcb"
    assert paper["arxiv_url"] is None and "{" not in paper["title"]


def test_an_answer_exports_as_markdown_bibtex_csl_and_json(api: httpx.Client) -> None:
    import bibtexparser

    body = {"question": "What is DASHA?", "k": 3}
    answer = Answer.model_validate(api.post("/ask", json=body).json())
    dasha = answer.cited_sources[0]

    md = api.post("/ask/export", json=body, params={"format": "markdown"})
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert 'filename="answer.md"' in md.headers["content-disposition"]
    assert md.text.startswith("## What is DASHA?\n") and dasha.title in md.text
    assert all(f"> {s}" in md.text for c in answer.citations for s in c.supporting)

    bib = api.post("/ask/export", json=body, params={"format": "bibtex", "all_sources": True})
    parsed = bibtexparser.parse_string(bib.text)
    assert bib.headers["content-type"].startswith("application/x-bibtex")
    ids = [e.fields_dict["abstractqa-id"].value for e in parsed.entries]
    assert ids == list(dict.fromkeys(s.paper_id for s in answer.sources))

    asked = api.post("/ask/export", json=body, params={"format": "json"})
    assert Answer.model_validate(asked.json()).answer == answer.answer

    unknown = api.post("/ask/export", json=body, params={"format": "docx"})
    assert unknown.status_code == 422


def test_a_rating_is_stored_with_the_answer_it_rates(api: httpx.Client, index: Path) -> None:
    from core.models import Feedback, FeedbackRecord
    from store.feedback import FeedbackStore

    answer = Answer.model_validate(api.post("/ask", json={"question": "What is DASHA?"}).json())
    rating = Feedback.of(answer, "down", "does not say what it improves on")
    body = rating.model_dump(mode="json")
    assert api.post("/feedback", json=body).status_code == 401  # a write: the token
    token = {"Authorization": f"Bearer {TOKEN}"}
    response = api.post("/feedback", json=body, headers=token)
    assert response.status_code == 201, response.text
    record = FeedbackRecord.model_validate(response.json())
    assert record.cited == [s.paper_id for s in answer.cited_sources]
    assert FeedbackStore(index).all()[-1] == record  # in the server's data directory
    bad = api.post("/feedback", json={"rating": "meh", "question": "x"}, headers=token)
    assert bad.status_code == 422 and "rating" in bad.text
    unknown = api.post("/feedback", json=body | {"cited": ["no-such-paper"]}, headers=token)
    assert unknown.status_code == 404 and unknown.json()["error"] == "paper_not_found"


def test_a_table_over_http_is_the_python_record_and_exports(
    api: httpx.Client, sample_service: object
) -> None:
    from openpyxl import load_workbook

    from core.models import Table

    body = {"topic": "federated learning", "columns": ["dataset", "main result"], "rows": 3}
    got = api.post("/table", json=body)
    assert got.status_code == 200, got.text
    table = Table.model_validate(got.json())
    assert len(table.rows) == 3 and [c.column for c in table.rows[0].cells] == body["columns"]
    mine = sample_service.table(**body)  # type: ignore[attr-defined]
    assert [(r.paper_id, [c.quote for c in r.cells]) for r in mine.rows] == [
        (r.paper_id, [c.quote for c in r.cells]) for r in table.rows
    ]

    sheet = api.post("/table/export", params={"format": "xlsx"}, json=body)
    assert sheet.headers["content-type"].startswith("application/vnd.openxmlformats")
    book = load_workbook(io.BytesIO(sheet.content)).active
    assert book is not None and book.cell(2, 1).value == table.rows[0].paper_id

    events = api.post("/table/stream", json=body).text
    assert events.count("event: row") == 3 and "event: table" in events

    none = api.post("/table", json={"topic": "chocolate cake recipes", "columns": ["dataset"]})
    assert none.status_code == 404 and none.json()["error"] == "no_matching_paper"
    blank = api.post("/table", json={"papers": ["x"], "columns": ["  "]})
    assert blank.status_code == 422  # FastAPI's shape, naming the column
    assert blank.json()["detail"][0]["loc"] == ["body", "columns", 0]

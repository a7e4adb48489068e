"""Evidence tables (issue 38): the engine, its exports, the CLI and the Streamlit page, over the
bundled sample's real index."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import bibtexparser
import numpy as np
import pytest
from openpyxl import load_workbook

from app.engine.export import export_table, table_format_for
from app.engine.service import QAService
from app.engine.table import Asked, column_question, span_of
from app.query import question as q
from app.ui.shared import escape
from core.errors import InputError, PaperNotFoundError
from core.models import Table, TableRequest
from core.settings import Settings
from core.tokens import words
from tests.conftest import count_embedded, paper_id_containing, start_app
from tests.test_cli import run

DASHA = "We develop and analyze DASHA"
COLUMNS = ["dataset", "main result", "number of clients"]


@pytest.fixture(scope="module")
def fed(sample_service: QAService) -> Table:
    return sample_service.table(topic="federated learning", columns=COLUMNS, rows=4)


def test_a_topic_gives_its_relevant_papers_each_cell_quoting_its_own_abstract(fed: Table) -> None:
    assert 2 <= len(fed.rows) <= 4 and fed.columns == COLUMNS and fed.complete
    assert all("federated" in r.abstract.lower() for r in fed.rows)
    for row in fed.rows:
        assert [c.column for c in row.cells] == COLUMNS
        for cell in row.cells:
            assert 0.0 <= cell.confidence <= 1.0
            if cell.stated:  # the quote is the abstract's sentence at its offsets, the text in it
                assert cell.start is not None and cell.end is not None
                assert row.abstract[cell.start : cell.end] == cell.quote
                assert cell.text in cell.quote
            else:
                assert cell.text == "not stated" and cell.quote == "" and cell.start is None
    assert any(c.stated for r in fed.rows for c in r.cells)


def test_ids_give_the_rows_in_order_and_bad_requests_name_what_is_wrong(
    sample_service: QAService,
) -> None:
    dasha = paper_id_containing(DASHA)
    other = paper_id_containing("asynchronous")
    table = sample_service.table(papers=[other, dasha], columns=["what it improves on"])
    assert [r.paper_id for r in table.rows] == [other, dasha] and table.rows[0].relevance is None

    with pytest.raises(PaperNotFoundError, match="'nope-1', 'nope-2'"):
        sample_service.table(papers=[dasha, "nope-1", "nope-2"], columns=["dataset"])
    with pytest.raises(InputError, match=r"columns\.1: a column needs a letter or digit"):
        sample_service.table(papers=[dasha], columns=["dataset", " \t "])
    assert sample_service.table(papers=[dasha], columns=["dataset", "Dataset"]).columns == [
        "dataset"
    ]
    with pytest.raises(InputError, match="needs rows"):
        sample_service.table(topic="  ", columns=["dataset"])
    with pytest.raises(InputError, match="No indexed paper matches"):
        sample_service.table(topic="recipes for chocolate cake", columns=["dataset"])
    with pytest.raises(ValueError, match="at most 200 characters"):
        TableRequest(topic="x", columns=["y" * 201])


def test_exports_read_back_with_their_libraries(fed: Table, tmp_path: Path) -> None:
    lines = list(csv.reader(io.StringIO(export_table(fed, "csv").decode())))
    assert lines[0][:2] == ["paper_id", "title"] and "main result (quote)" in lines[0]
    assert [line[0] for line in lines[1:]] == [r.paper_id for r in fed.rows]
    at = lines[0].index("main result")
    assert [line[at] for line in lines[1:]] == [r.cells[1].text for r in fed.rows]

    (tmp_path / "t.xlsx").write_bytes(export_table(fed, table_format_for("t.xlsx")))
    sheet = load_workbook(tmp_path / "t.xlsx").active
    assert sheet is not None
    grid = [[c.value for c in line] for line in sheet.iter_rows()]
    assert grid[0] == lines[0] and [g[0] for g in grid[1:]] == [r.paper_id for r in fed.rows]

    library = bibtexparser.parse_string(export_table(fed, "bibtex").decode())
    assert [e.fields_dict["abstractqa-id"].value for e in library.entries] == [
        r.paper_id for r in fed.rows
    ]
    markdown = export_table(fed, "markdown").decode().splitlines()
    assert markdown[0] == "## federated learning" and len(markdown) == 4 + len(fed.rows)
    assert Table.model_validate_json(export_table(fed, "json")) == fed
    with pytest.raises(InputError, match="table format"):
        table_format_for("t.docx")


def test_cli_writes_the_json_record_and_files(sample_settings: Settings, tmp_path: Path) -> None:
    env = {"AQA_DATA_DIR": str(sample_settings.data_dir)}
    dasha = paper_id_containing(DASHA)
    result = run("table", "--paper", dasha, "--column", "dataset", "--column", "speed-up",
                 "--json", "--out", str(tmp_path / "t.csv"), **env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["columns"] == ["dataset", "speed-up"]
    row = record["rows"][0]
    assert row["paper_id"] == dasha and row["title"] and row["year"]
    assert set(row["cells"][0]) >= {"column", "text", "quote", "stated", "confidence"}
    assert (tmp_path / "t.csv").read_text().startswith("paper_id,title,")
    blank = run("table", "--paper", dasha, "--column", " ", **env)
    assert blank.returncode == 2 and "columns.0: a column needs a letter or digit" in blank.stderr
    unknown = run("table", "--paper", "nope", "--column", "dataset", **env)
    assert unknown.returncode == 3 and "'nope'" in unknown.stderr


def page_text(at: Any) -> str:
    return "\n".join(str(m.value) for m in [*at.markdown, *at.caption])


def test_the_page_fills_shows_a_cells_sentence_and_adds_a_column_without_refilling(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.switch_page("views/table.py").run()
    at.text_input(key="table-topic").set_value("federated learning")
    at.multiselect(key="table-columns").set_value(["dataset", "main result"])
    at.number_input(key="table-rows").set_value(3)
    at.button(key="FormSubmitter:table-form-Fill the table").click().run()
    assert not at.exception, at.exception
    filled = at.session_state["table-data"]
    assert (
        filled.complete and len(filled.rows) == 3 and filled.columns == ["dataset", "main result"]
    )
    grid = at.dataframe[0].value
    assert list(grid.columns[:3]) == ["Paper", "dataset", "main result"] and len(grid) == 3
    assert {f.label for f in at.get("download_button")} >= {"CSV", "Markdown", "Excel", "BibTeX"}
    assert "Link to this table" in page_text(at)
    assert at.query_params["col"] == ["dataset", "main result"]

    stated = next((i, c) for i, r in enumerate(filled.rows) for c in r.cells if c.stated)
    at.session_state["table-grid"] = {"selection": {"cells": [[stated[0], stated[1].column]]}}
    at.run()
    assert f"<mark>{escape(stated[1].quote[:30])}" in page_text(at)

    before = {r.paper_id: r.cells[0] for r in filled.rows}
    at.multiselect(key="table-columns").set_value(["dataset", "limitation"])
    at.button(key="FormSubmitter:table-form-Fill the table").click().run()
    after = at.session_state["table-data"]
    assert after.columns == ["dataset", "limitation"]
    assert [r.paper_id for r in after.rows] == list(before)
    assert all(r.cells[0] is before[r.paper_id] for r in after.rows)  # kept, not refilled
    assert all(r.cells[1].column == "limitation" for r in after.rows)


def test_a_shared_link_reopens_the_table(
    monkeypatch: pytest.MonkeyPatch, sample_settings: Settings
) -> None:
    dasha = paper_id_containing(DASHA)
    at = start_app(monkeypatch, sample_settings.data_dir)
    at.query_params["col"] = ["dataset", "speed-up"]
    at.query_params["paper"] = [dasha]
    at.switch_page("views/table.py").run()
    assert not at.exception, at.exception
    filled = at.session_state["table-data"]
    assert [r.paper_id for r in filled.rows] == [dasha] and filled.columns == [
        "dataset",
        "speed-up",
    ]


def test_a_stopped_table_keeps_the_rows_filled(sample_service: QAService) -> None:
    plan = sample_service.table_plan(
        TableRequest(topic="learning", columns=["dataset", "main result"], rows=12)
    )
    assert len(plan.rows) == 12 and not any(r.cells for r in plan.rows)
    filled = []
    for row in plan.fill():
        filled.append(row)
        if len(filled) == 5:
            break  # the user stops
    partial = plan.result(filled, complete=False)
    assert not partial.complete and [r.paper_id for r in partial.rows] == [
        r.paper_id for r in plan.rows[:5]
    ]
    assert all(len(r.cells) == 2 for r in partial.rows)


def test_a_column_added_to_a_table_reads_no_abstract_again(
    sample_service: QAService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sentences a table read are not embedded again when the user adds a column (or asks
    of the same papers), and the cells they give are the ones a first reading gives."""
    model = sample_service.embedder.model
    embedded = count_embedded(monkeypatch, model)
    sample_service.embedder.forget()
    request = {"topic": "graph neural networks", "rows": 5}
    first = sample_service.table(columns=["dataset"], **request)
    assert len(embedded) > 5 * 3  # the rows' sentences were read
    embedded.clear()
    again = sample_service.table(columns=["dataset", "main result"], **request)
    assert embedded == [column_question("main result")]  # the new column alone
    embedded.clear()
    assert [r.cells[0] for r in again.rows] == [r.cells[0] for r in first.rows]
    sentences = [c.quote for r in again.rows for c in r.cells if c.stated]
    cached = sample_service.embedder.embed_sentences(sentences)
    fresh = type(model).embed_documents(model, sentences)  # the model itself, uncounted
    assert embedded == [] and np.allclose(cached, np.asarray(fresh), atol=1e-5)


@pytest.mark.parametrize(
    ("column", "sentence", "items"),
    [
        (
            "datasets",
            "We evaluate the proposed network on human activity videos using KTH, Weizmann "
            "action, and UCF-101 datasets.",
            ["KTH", "Weizmann action", "UCF-101"],
        ),
        (
            "key features",
            "FedPAQ relies on three key features: (1) periodic averaging at the server; (2) "
            "partial device participation; and (3) quantized message-passing.",
            ["periodic averaging"],
        ),
        (
            "condition generalizing strong convexity",
            "The most studied error bound is the quadratic error bound, which generalizes "
            "strong convexity and is satisfied by many problems.",
            ["quadratic error bound"],
        ),
    ],
)
def test_a_cells_span_keeps_a_list_and_what_a_colon_or_which_clause_elaborates(
    column: str, sentence: str, items: list[str]
) -> None:
    """A cell's text is cut from its sentence, but never inside a comma-separated list, after
    the lead-in of a colon, or off the thing a "which" clause describes (training tables)."""

    def asked(name: str) -> Asked:
        text = column_question(name)
        return Asked(name, text, tuple(words([text])[0]), np.zeros(1), q.wanted(text), None)

    span = span_of(sentence, asked(column))
    assert all(item in span for item in items), span
    clause = "This scales to large graphs; it reaches 91.2% accuracy on Cora, while others fail."
    assert span_of(clause, asked("accuracy")) == "it reaches 91.2% accuracy on Cora"

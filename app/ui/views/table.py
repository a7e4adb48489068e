"""Evidence table: the same short questions (columns) asked of many papers (rows). A cell clicked
shows its sentence highlighted in the abstract; columns are added or removed without refilling
the others; the table downloads as CSV, Markdown, Excel, JSON and BibTeX; its link reopens it."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from urllib.parse import urlencode

import pandas as pd
import streamlit as st

from app.engine.export import TABLE_MEDIA_TYPES, TABLE_SUFFIXES, TableFormat, export_table
from app.engine.service import QAService
from app.ui import shared as ui
from core.errors import AQAError
from core.models import MAX_TABLE_ROWS, Table, TableCell, TableRequest, TableRow

STARTERS = ["dataset", "main result", "baseline beaten", "evaluation metric", "limitation"]
DOWNLOADS: dict[TableFormat, str] = {
    "csv": "CSV",
    "markdown": "Markdown",
    "xlsx": "Excel",
    "json": "JSON",
    "bibtex": "BibTeX",
}


@dataclass
class Filled:
    """The table on screen: what its rows were asked with, and the rows filled so far."""

    topic: str
    papers: list[str]
    rows_asked: int
    columns: list[str]
    rows: list[TableRow] = field(default_factory=list)
    total: int = 0
    complete: bool = False
    suggested: list[str] = field(default_factory=list)

    def same_rows(self, topic: str, papers: list[str], rows_asked: int) -> bool:
        return (topic, papers, rows_asked) == (self.topic, self.papers, self.rows_asked)

    def table(self) -> Table:
        return Table(
            topic=self.topic or None,
            columns=self.columns,
            rows=self.rows,
            suggested_columns=self.suggested,
            complete=self.complete,
        )


def frame(filled: Filled) -> pd.DataFrame:
    """The rows as the grid shows them: the paper, a column per question ("not stated" where
    the abstract does not say), then its year, venue and link."""
    data: dict[str, list[object]] = {"Paper": [r.title for r in filled.rows]}
    for n, column in enumerate(filled.columns):
        data[column] = [r.cells[n].text if n < len(r.cells) else "" for r in filled.rows]
    data |= {
        "Year": [r.year for r in filled.rows],
        "Venue": [r.venue or "" for r in filled.rows],
        "Link": [r.url or "" for r in filled.rows],
    }
    return pd.DataFrame(data)


def show_grid(filled: Filled, key: str) -> object:
    config = {
        "Paper": st.column_config.TextColumn("Paper", width="medium", pinned=True),
        "Year": st.column_config.NumberColumn("Year", format="%d", width="small"),
        "Link": st.column_config.LinkColumn("Link", display_text="open", width="small"),
        **{c: st.column_config.TextColumn(c, width="medium") for c in filled.columns},
    }
    return st.dataframe(
        frame(filled),
        column_config=config,
        hide_index=True,
        on_select="rerun",
        selection_mode="single-cell",
        key=key,
    )


def fill(service: QAService, filled: Filled, request: TableRequest) -> None:
    """Fill the request's rows into ``filled`` one by one, the grid redrawn after each: a click
    elsewhere (Stop) ends the run and keeps the rows filled so far."""
    plan = service.table_plan(request)
    filled.total = len(plan.rows)
    filled.suggested = plan.suggested
    bar = st.progress(0.0, text=f"Filling {filled.total} rows…")
    st.button("Stop", key="table-stop", icon=":material/stop_circle:")
    grid = st.empty()
    for row in plan.fill():
        filled.rows.append(row)
        bar.progress(len(filled.rows) / filled.total, text=f"{len(filled.rows)} of {filled.total}")
        grid.dataframe(frame(filled), hide_index=True)
    filled.complete = True
    bar.empty()
    grid.empty()


def add_columns(service: QAService, filled: Filled, columns: list[str]) -> None:
    """The table with these columns: new ones filled for the rows already there, removed ones
    dropped, the others kept as they were."""
    have = {c: n for n, c in enumerate(filled.columns)}
    new = [c for c in columns if c not in have]
    extra: dict[str, list[TableCell]] = {}
    if new and filled.rows:
        ids = [r.paper_id for r in filled.rows]
        with st.spinner(f"Filling {len(new)} new column(s)…"):
            request = TableRequest.read(papers=ids, columns=new, rows=len(ids))
            extra = {r.paper_id: r.cells for r in service.table_plan(request).fill()}
    for row in filled.rows:
        kept = {c: row.cells[have[c]] for c in columns if c in have}
        kept |= dict(zip(new, extra.get(row.paper_id, []), strict=False))
        row.cells = [kept[c] for c in columns if c in kept]
    filled.columns = columns


def cell_detail(filled: Filled, selection: object) -> None:
    """The clicked cell: its answer, confidence and the abstract with its sentence marked."""
    cells = getattr(getattr(selection, "selection", None), "cells", None) or []
    if not cells:
        st.caption("Click a cell to see the sentence it came from.")
        return
    position, column = cells[0][0], cells[0][1]
    if position >= len(filled.rows):
        return
    row = filled.rows[position]
    st.subheader(row.title)
    meta = ", ".join(str(x) for x in (", ".join(row.authors[:4]), row.venue, row.year) if x)
    st.caption(f"{meta} · `{row.paper_id}`")
    if column in filled.columns:
        cell = row.cells[filled.columns.index(column)]
        if cell.stated:
            st.markdown(f"**{column}:** {ui.escape(cell.text)}  \nconfidence {cell.confidence:.2f}")
        else:
            note = " (the model's quote is not in the abstract)" if cell.flagged else ""
            st.markdown(f"**{column}:** _not stated_ in this abstract{note}")
        marked = [cell.quote] if cell.stated else []
    else:
        marked = []
    st.markdown(
        f'<div class="aqa-abstract">{ui.highlight(row.abstract, marked)}</div>',
        unsafe_allow_html=True,
    )


def share(filled: Filled) -> str:
    query: dict[str, object] = {"col": filled.columns, "rows": str(filled.rows_asked)}
    if filled.topic:
        query["topic"] = filled.topic
    if filled.papers:
        query["paper"] = filled.papers
    return urlencode(query, doseq=True)


def downloads(filled: Filled) -> None:
    table = filled.table()
    for place, (fmt, label) in zip(st.columns(len(DOWNLOADS)), DOWNLOADS.items(), strict=True):
        suffix = next(s for s, f in TABLE_SUFFIXES.items() if f == fmt)
        place.download_button(
            label,
            data=export_table(table, fmt),
            file_name=f"table{suffix}",
            mime=TABLE_MEDIA_TYPES[fmt].split(";")[0],
            key=f"table-download-{fmt}",
            on_click="ignore",
            icon=":material/download:",
        )


settings = ui.settings()
service = ui.get_service(settings)
st.title("Evidence table")
st.caption(
    "The same short questions asked of many papers: each cell quotes that paper's own abstract, "
    "or says *not stated*."
)

if "table-opened" not in st.session_state:  # a shared link reopens its table
    st.session_state["table-opened"] = True
    params = st.query_params
    if params.get_all("col"):
        st.session_state["table-topic"] = params.get("topic", "")
        st.session_state["table-papers"] = "\n".join(params.get_all("paper"))
        st.session_state["table-columns"] = params.get_all("col")
        rows_param = params.get("rows", "10")
        st.session_state["table-rows"] = int(rows_param) if rows_param.isdigit() else 10
        st.session_state["table-autofill"] = True

current: Filled | None = st.session_state.get("table-data")
chosen = st.session_state.get("table-columns", STARTERS[:2])
options = list(dict.fromkeys([*chosen, *(current.suggested if current else []), *STARTERS]))
with st.form("table-form", border=False):
    st.text_input(
        "Topic", key="table-topic", placeholder="a question or keywords, e.g. federated learning"
    )
    st.text_area("Or paper ids, one per line", key="table-papers", height=80)
    st.multiselect(
        "Columns",
        options,
        default=None if "table-columns" in st.session_state else STARTERS[:2],
        key="table-columns",
        accept_new_options=True,
        placeholder="type a column (a short question) and press Enter",
    )
    st.number_input(
        "Papers (for a topic)",
        1,
        MAX_TABLE_ROWS,
        None if "table-rows" in st.session_state else 10,
        key="table-rows",
    )
    go = st.form_submit_button("Fill the table", type="primary", icon=":material/table_view:")

if go or st.session_state.pop("table-autofill", False):
    topic = st.session_state["table-topic"].strip()
    papers = [p.strip() for p in st.session_state["table-papers"].splitlines() if p.strip()]
    columns = list(st.session_state["table-columns"])
    rows_asked = int(st.session_state["table-rows"])
    try:
        same = current is not None and current.same_rows(topic, papers, rows_asked)
        if current is not None and current.complete and same:
            add_columns(service, current, columns)
        else:
            request = TableRequest.read(
                topic=topic or None, papers=papers, columns=columns, rows=rows_asked
            )
            current = Filled(topic, papers, rows_asked, columns)
            st.session_state["table-data"] = current
            fill(service, current, request)
    except AQAError as exc:
        st.session_state.pop("table-data", None)
        st.error(str(exc), icon=":material/error:")
        st.stop()
    linked = {"col": current.columns, "rows": str(current.rows_asked)}
    st.query_params.from_dict(  # the address bar links to this table
        linked
        | ({"topic": current.topic} if current.topic else {})
        | ({"paper": current.papers} if current.papers else {})
    )

if current is None:
    st.info("Write a topic (or paste paper ids) and a column or two, then fill the table.")
    st.stop()
if not current.complete:
    st.warning(f"Stopped: {len(current.rows)} of {current.total} rows filled.")
event = show_grid(current, "table-grid")
if current.suggested:
    st.caption("Columns these papers often answer: " + ", ".join(current.suggested))
downloads(current)
page = st.context.url.split("?", 1)[0] if st.context.url else ""
st.caption(
    f'<a href="{html.escape(page + "?" + share(current), quote=True)}" target="_blank" '
    'rel="noopener">Link to this table</a>',
    unsafe_allow_html=True,
)
cell_detail(current, event)

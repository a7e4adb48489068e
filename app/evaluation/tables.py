"""Scoring evidence tables against annotated ones (data/eval/tables.jsonl, data/eval/README.md).

Each annotated table names its papers, its columns, and for every cell either the facts the
answer must hold (each a list of accepted variants, with the sentence that states them) or
"not stated". A table is filled with its papers as the rows, as a user who gave those ids would
get it; a cell is right when it is stated and its text holds every fact, or when both say "not
stated". Reported: cell accuracy (and per column), the same with the quote in place of the span
(what a shorter span loses), "not stated" precision and recall, and quotes that are not a
sentence of the row's own abstract (must be 0).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from app.engine.service import QAService
from app.engine.table import CellFiller
from app.evaluation.harness import normalise
from app.providers.selector import Selector
from core.errors import InputError
from core.models import TableRequest
from core.text import sentence_spans


class GoldCell(BaseModel):
    paper: str
    column: str
    stated: bool
    facts: list[list[str]] = Field(default_factory=list)
    evidence: str | None = None


class GoldTable(BaseModel):
    id: str
    topic: str
    papers: list[str]
    columns: list[str]
    cells: list[GoldCell]
    batch: str | None = None


class ColumnScore(BaseModel):
    cells: int
    right: int


class TableReport(BaseModel):
    tables: int
    cells: int
    accuracy: float = Field(
        description="Cells right: stated with every fact in the text, or both 'not stated'."
    )
    quote_accuracy: float = Field(description="The same, reading the quote instead of the span.")
    stated_right: float = Field(description="Of the cells the gold states: stated with every fact.")
    not_stated_precision: float
    not_stated_recall: float
    wrong_paper_quotes: int
    seconds_per_table: float
    by_column: dict[str, ColumnScore]
    misses: list[dict[str, object]] = Field(default_factory=list)


def load_tables(path: Path) -> list[GoldTable]:
    tables = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tables.append(GoldTable.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            raise InputError(f"{path}, line {n}: not an annotated table ({exc})") from exc
    return tables


def holds(text: str, facts: list[list[str]]) -> bool:
    body = normalise(text)
    return bool(facts) and all(any(normalise(v) in body for v in fact) for fact in facts)


def score_tables(
    service: QAService,
    tables: list[GoldTable],
    progress: Callable[[int, int], None] | None = None,
    selector: Selector | None = None,
) -> TableReport:
    """Fill each annotated table (its papers as the rows) and score its cells; ``selector``
    fills them instead of the shipped one (a fold's column stage, in cross-validation)."""
    right = quoted = gold_stated = stated_right = 0
    ours_ns = gold_ns = both_ns = wrong = total = 0
    by_column: dict[str, ColumnScore] = {}
    misses: list[dict[str, object]] = []
    started = time.perf_counter()
    for n, gold in enumerate(tables, start=1):
        service.embedder.forget()  # each table cold: timed and filled as a first one
        plan = service.table_plan(TableRequest(papers=gold.papers, columns=gold.columns))
        if selector is not None:
            plan.filler = CellFiller(service.embedder, selector)
        table = plan.result(list(plan.fill()), complete=True)
        rows = {r.paper_id: r for r in table.rows}
        own = {
            r.paper_id: {r.abstract[a:b] for a, b in sentence_spans(r.abstract)} for r in table.rows
        }
        for cell in gold.cells:
            row = rows[cell.paper]
            got = row.cells[gold.columns.index(cell.column)]
            total += 1
            if got.stated and got.quote not in own[cell.paper]:
                wrong += 1
            ours_ns += not got.stated
            if cell.stated:
                gold_stated += 1
                ok = got.stated and holds(got.text, cell.facts)
                quoted += got.stated and holds(got.quote, cell.facts)
                stated_right += ok
            else:
                gold_ns += 1
                ok = not got.stated
                both_ns += ok
                quoted += ok
            right += ok
            column = by_column.setdefault(cell.column, ColumnScore(cells=0, right=0))
            column.cells += 1
            column.right += ok
            if not ok:
                misses.append({"table": gold.id, "paper": cell.paper, "column": cell.column,
                               "gold": cell.facts or "not stated", "text": got.text,
                               "confidence": got.confidence})  # fmt: skip
        if progress:
            progress(n, len(tables))
    return TableReport(
        tables=len(tables),
        cells=total,
        accuracy=round(right / max(1, total), 4),
        quote_accuracy=round(quoted / max(1, total), 4),
        stated_right=round(stated_right / max(1, gold_stated), 4),
        not_stated_precision=round(both_ns / max(1, ours_ns), 4),
        not_stated_recall=round(both_ns / max(1, gold_ns), 4),
        wrong_paper_quotes=wrong,
        seconds_per_table=round((time.perf_counter() - started) / max(1, len(tables)), 3),
        by_column=by_column,
        misses=misses,
    )

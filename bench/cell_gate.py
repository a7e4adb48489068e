"""A learned "not stated" decision for evidence-table cells, cross-validated (issue 38).

    AQA_DATA_DIR=<index holding their papers> .venv/bin/python bench/cell_gate.py \
        [--tables data/train/tables.jsonl]

Today a cell is "not stated" when its best sentence's chance is under `STATED_AT` or the column
asks a detail (a number, a name) that no sentence can give. This asks whether a model over the
cell as a whole decides better, on the training tables only: every cell's sentence chances come
from a column stage fitted without its batch, and a gate fitted on the other batches' cells
decides it. Not fully nested: those other cells' chances came from stages that did see the
decided batch, a mild leak in the gate's favour (15 x 14 fits would remove it). Three outcomes
per cell: the gold says "not stated"; the best sentence's span holds the facts; it does not (a
wrong sentence, or the right one cut to a span without the fact: either decision is wrong).
Rows with no sentence of three words (which `eval-table` makes "not stated") are left out. A gate
says "stated" when the second outcome is likelier than the first, which is what maximises cell
accuracy. Printed: cell accuracy, "not stated" precision and recall, for today's rule, each gate
and a perfect gate (the ceiling a decision alone can reach).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.service import QAService
from app.engine.table import STATED_AT, span_of
from app.evaluation.tables import holds, load_tables
from app.evaluation.training import ColumnRows, filled_cells, fit_column
from app.providers.selector import KINDS
from app.query import question as q

NOT_STATED, SPAN_RIGHT, WRONG = 0, 1, 2


def logit(p: Any) -> Any:
    """Log-odds of a chance or an array of chances, kept finite at 0 and 1."""
    return special.logit(np.clip(p, 1e-4, 1 - 1e-4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, default=Path("data/train/tables.jsonl"))
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    service = QAService()
    model = service.embedder.spec.name
    rows, batches, cells = ColumnRows(), [], []
    for filled in filled_cells(service, load_tables(args.tables)):
        column, cell = filled.column, filled.cell
        rows.features.append(filled.features)
        rows.sentences.append(filled.vectors)
        rows.asked.append(column.vector)
        rows.labels.append(filled.labels)
        missing = column.detail is not None and not q.states(
            column.detail, filled.sentences, f"{column.question} {filled.title}"
        )
        spans = [cell.stated and holds(span_of(s, column), cell.facts) for s in filled.sentences]
        cells.append((cell.stated, missing, column.detail is not None, column.kinds, spans))
        batches.append(filled.table.batch or "-")
    batch = np.asarray(batches)
    chances: list[np.ndarray] = [np.zeros(0)] * len(cells)
    for held in sorted(set(batches)):  # each cell's chances from a stage fitted without its batch
        fitted = [i for i, b in enumerate(batches) if b != held]
        kept = [[getattr(rows, f.name)[i] for i in fitted] for f in dataclasses.fields(rows)]
        stage = fit_column(ColumnRows(*kept), args.seed, model)
        for i in np.flatnonzero(batch == held):
            chances[i] = stage.probability(
                rows.features[i], rows.asked[i], rows.sentences[i], model
            )
    outcome, plain, best_row = [], [], []
    for (stated, missing, detail, kinds, spans), chance, x in zip(
        cells, chances, rows.features, strict=True
    ):
        order = np.argsort(-chance, kind="stable")  # the first best, as the table takes it
        first, second = chance[order[0]], chance[order[1]] if len(chance) > 1 else 0.0
        outcome.append(NOT_STATED if not stated else SPAN_RIGHT if spans[order[0]] else WRONG)
        plain.append(
            [logit(first), logit(second), first - second, chance.mean(), np.log(len(chance))]
            + [float(missing), float(detail)]
            + [float(k in kinds) for k in KINDS]
        )
        best_row.append(list(x[order[0]]))
    y = np.asarray(outcome)
    today = np.asarray([p[0] >= logit(STATED_AT) and not p[5] for p in plain])
    report("today's rule", today, y)
    report("a perfect decision", y == SPAN_RIGHT, y)
    for name, x in (
        ("gate over the cell's chances and column", np.asarray(plain)),
        ("... and the best sentence's features", np.hstack([plain, best_row])),
    ):
        report(name, gated(x, y, batch), y)


def gated(x: np.ndarray, y: np.ndarray, batch: np.ndarray) -> np.ndarray:
    """Stated where a multinomial logistic, fitted on the other batches, finds the best
    sentence's span likelier right than the cell not stated."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    stated = np.zeros(len(y), dtype=bool)
    for held in sorted(set(batch)):
        train, test = batch != held, batch == held
        scaler = StandardScaler().fit(x[train])
        model = LogisticRegression(max_iter=5000).fit(scaler.transform(x[train]), y[train])
        p = model.predict_proba(scaler.transform(x[test]))
        column = {int(c): i for i, c in enumerate(model.classes_)}
        stated[test] = p[:, column[SPAN_RIGHT]] > p[:, column[NOT_STATED]]
    return stated


def report(name: str, stated: np.ndarray, y: np.ndarray) -> None:
    right = np.where(stated, y == SPAN_RIGHT, y == NOT_STATED)
    said, gold = ~stated, y == NOT_STATED
    both = (said & gold).sum()
    print(
        f"{name}: {len(y)} cells, accuracy {right.mean():.3f}, not stated precision "
        f"{both / max(1, said.sum()):.3f}, recall {both / gold.sum():.3f}"
    )


if __name__ == "__main__":
    main()

"""The selector's column stage, cross-validated over the training tables' batches (issue 38).

    AQA_DATA_DIR=<index holding their papers> .venv/bin/python bench/columns.py \
        [--tables data/train/tables.jsonl] [--rank 16] [--penalty 0.003]

Fits on all batches but one and measures on that one, for each batch: of the stated cells, how
often the sentence that states the fact is ranked first (and in the first two), by the logistic
model over the features alone and by the shipped form (that model and the learned similarity of
the column's and the sentence's vectors, fitted jointly). The training tables only: the frozen
set (data/eval/tables.jsonl) is measured by `abstract-qa eval-table`, never fitted on.

With --cells, each held-out batch's tables are also filled by the fold's column stage and scored
as `abstract-qa eval-table` scores (cell accuracy, the quote's, "not stated" precision and
recall), with --stated-at in place of the shipped threshold.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine import table as table_module
from app.engine.service import QAService
from app.evaluation import training
from app.evaluation.tables import TableReport, load_tables, score_tables
from app.evaluation.training import ColumnRows, column_rows, fit_column, measure
from app.providers.selector import shipped


def subset(rows: ColumnRows, picked: list[int]) -> ColumnRows:
    return ColumnRows(
        [rows.features[i] for i in picked],
        [rows.sentences[i] for i in picked],
        [rows.asked[i] for i in picked],
        [rows.labels[i] for i in picked],
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=Path, default=Path("data/train/tables.jsonl"))
    parser.add_argument("--rank", type=int, default=training.PAIRING_RANK)
    parser.add_argument("--penalty", type=float, default=training.PAIRING_PENALTY)
    parser.add_argument("--steer-penalty", type=float, default=training.STEER_PENALTY)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--cells", action="store_true", help="also fill and score the cells")
    parser.add_argument("--stated-at", type=float, default=table_module.STATED_AT)
    args = parser.parse_args()
    table_module.STATED_AT = args.stated_at
    training.PAIRING_RANK, training.PAIRING_PENALTY = args.rank, args.penalty
    training.STEER_PENALTY = args.steer_penalty
    service = QAService()
    tables = load_tables(args.tables)
    batch_of: list[str] = []
    rows = ColumnRows()
    for table in tables:  # one table at a time, to know each cell's batch
        got = column_rows(service, [table])
        for name in ("features", "sentences", "asked", "labels"):
            getattr(rows, name).extend(getattr(got, name))
        batch_of += [table.batch or "-"] * len(got.labels)
    scores: dict[str, list[np.ndarray]] = {"features alone": [], "with the similarity": []}
    labels: list[np.ndarray] = []
    reports: list[TableReport] = []
    for batch in sorted(set(batch_of)):
        fitted = [i for i, b in enumerate(batch_of) if b != batch]
        measured = [i for i, b in enumerate(batch_of) if b == batch]
        train, test = subset(rows, fitted), subset(rows, measured)
        model = service.embedder.spec.name
        joint = fit_column(train, args.seed, model)
        alone = [joint.plain.probability(x) for x in test.features]
        cells = zip(test.features, test.asked, test.sentences, strict=True)
        both = [joint.probability(*cell, model) for cell in cells]
        for name, got_scores in (("features alone", alone), ("with the similarity", both)):
            scored = measure(got_scores, test.labels)
            print(f"{batch} {name}: first {scored.first:.3f}, top two {scored.top_two:.3f}")
        if args.cells:
            held_out = [t for t in tables if (t.batch or "-") == batch]
            selector = dataclasses.replace(shipped(), column=joint)
            report = score_tables(service, held_out, selector=selector)
            reports.append(report)
            print(f"{batch} cells: {summary(report)}")
        scores["features alone"] += alone
        scores["with the similarity"] += both
        labels += test.labels
    for name, got_scores in scores.items():
        scored = measure(got_scores, labels)
        print(
            f"all batches, {name}: {scored.questions} stated cells, first {scored.first:.3f}, "
            f"top two {scored.top_two:.3f}"
        )
    if reports:
        print(f"all batches, cells: {summary(*reports)}")


def summary(*reports: TableReport) -> str:
    """Cell figures pooled over folds (each weighted by its cells)."""
    cells = sum(r.cells for r in reports)

    def mean(name: str) -> float:
        return sum(getattr(r, name) * r.cells for r in reports) / max(1, cells)

    return (
        f"{cells} cells, accuracy {mean('accuracy'):.3f}, quote {mean('quote_accuracy'):.3f}, "
        f"stated right {mean('stated_right'):.3f}, not stated precision "
        f"{mean('not_stated_precision'):.3f}, recall {mean('not_stated_recall'):.3f}"
    )


if __name__ == "__main__":
    main()

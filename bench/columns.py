"""The selector's column stage, cross-validated over the training tables' batches (issue 38).

    AQA_DATA_DIR=<index holding their papers> .venv/bin/python bench/columns.py \
        [--tables data/train/tables.jsonl] [--rank 16] [--penalty 0.003]

Fits on all batches but one and measures on that one, for each batch: of the stated cells, how
often the sentence that states the fact is ranked first (and in the first two), by the logistic
model over the features alone and by the shipped form (that model and the learned similarity of
the column's and the sentence's vectors, fitted jointly). The training tables only: the frozen
set (data/eval/tables.jsonl) is measured by `abstract-qa eval-table`, never fitted on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.service import QAService
from app.evaluation import training
from app.evaluation.tables import load_tables
from app.evaluation.training import ColumnRows, column_rows, fit_column, measure


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
    parser.add_argument("--seed", type=int, default=37)
    args = parser.parse_args()
    training.PAIRING_RANK, training.PAIRING_PENALTY = args.rank, args.penalty
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
        scores["features alone"] += alone
        scores["with the similarity"] += both
        labels += test.labels
    for name, got_scores in scores.items():
        scored = measure(got_scores, labels)
        print(
            f"all batches, {name}: {scored.questions} stated cells, first {scored.first:.3f}, "
            f"top two {scored.top_two:.3f}"
        )


if __name__ == "__main__":
    main()

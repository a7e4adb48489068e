"""Evidence-table speed (issue 38): a topic's 20 papers by 4 columns, offline, on an index.

    AQA_DATA_DIR=<index> .venv/bin/python bench/table.py [--rows 20]

Prints the time to the first row (rows found and the first filled) and to the whole table,
median and worst over topics, after one warm-up table; each table cold (no sentence vector kept
from another). Then, as the app adds a column to a table on screen, the time to fill one more
column for the same rows (their sentences' vectors kept from the table).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.service import QAService
from core.models import TableRequest

TOPICS = [
    "federated learning with heterogeneous clients",
    "offline reinforcement learning",
    "graph neural networks for molecules",
    "diffusion models for image generation",
    "adversarial robustness certification",
    "Bayesian optimization",
    "large language model reasoning",
    "contrastive self-supervised learning",
    "neural machine translation",
    "differential privacy in deep learning",
]
COLUMNS = ["dataset", "main result", "baseline beaten", "limitation addressed"]
ADDED = "sample size"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20)
    args = parser.parse_args()
    service = QAService()
    service.warm()
    service.table(TableRequest(topic="warm up", columns=COLUMNS, rows=args.rows))
    first, whole, added = [], [], []
    for topic in TOPICS:
        service.embedder.forget()  # each table cold: no sentence embedded by another topic
        started = time.perf_counter()
        plan = service.table_plan(TableRequest(topic=topic, columns=COLUMNS, rows=args.rows))
        rows = plan.fill()
        next(rows)
        first.append(time.perf_counter() - started)
        n = 1 + sum(1 for _ in rows)
        whole.append(time.perf_counter() - started)
        started = time.perf_counter()
        ids = [r.paper_id for r in plan.rows]
        service.table(TableRequest(papers=ids, columns=[ADDED], rows=len(ids)))
        added.append(time.perf_counter() - started)
        print(
            f"{topic}: {n} rows, first {first[-1]:.3f} s, all {whole[-1]:.3f} s, "
            f"a column added {added[-1]:.3f} s",
            flush=True,
        )
    print(
        f"first row: median {statistics.median(first):.3f} s, worst {max(first):.3f} s; "
        f"table: median {statistics.median(whole):.3f} s, worst {max(whole):.3f} s; "
        f"a column added: median {statistics.median(added):.3f} s, worst {max(added):.3f} s"
    )


if __name__ == "__main__":
    main()

"""Retrieval quality on queries nobody on the team wrote: each paper's title as the query,
against an index of the abstracts with their titles removed.

    .venv/bin/python bench/retrieval.py --papers 5000 --queries 400

Prints recall@1, recall@10 and MRR@10 for dense, BM25 and the fusion variants, as a Markdown
table. The index is built once in --data-dir and reused (ingest is idempotent).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from corpus import CORPUS, read_records

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.engine.retrieve import Fusion, Retriever  # noqa: E402
from core.models import Mode  # noqa: E402
from core.settings import get_settings  # noqa: E402
from ingest.pipeline import ingest  # noqa: E402

VARIANTS: list[tuple[str, Mode, Fusion, float]] = [
    ("dense", "dense", "rrf", 0.5),
    ("bm25", "bm25", "rrf", 0.5),
    ("rrf (dense weight 0.5)", "hybrid", "rrf", 0.5),
    ("rrf (dense weight 0.7)", "hybrid", "rrf", 0.7),
    ("convex (dense weight 0.5)", "hybrid", "convex", 0.5),
    ("convex (dense weight 0.7)", "hybrid", "convex", 0.7),
    ("convex (dense weight 0.85)", "hybrid", "convex", 0.85),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--papers", type=int, default=5000, help="papers in the index")
    parser.add_argument("--queries", type=int, default=400, help="title queries")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--data-dir", default="/tmp/aqa-bench-retrieval")
    args = parser.parse_args()

    records = read_records(args.corpus)
    rng = random.Random(args.seed)
    chosen = rng.sample(records, min(args.papers, len(records)))
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    corpus = data_dir / "untitled.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        for r in chosen:
            fh.write(json.dumps({k: r[k] for k in ("id", "abstract", "year", "venue")}) + "\n")
    settings = get_settings({"data_dir": data_dir / "index"})
    t = time.perf_counter()
    report = ingest([corpus], settings)
    print(
        f"index: {report.papers} papers, {report.chunks} chunks "
        f"({report.added} embedded now) in {time.perf_counter() - t:.0f}s",
        file=sys.stderr,
    )

    queries = rng.sample(chosen, min(args.queries, len(chosen)))
    retriever = Retriever(settings)
    rows = []
    for name, mode, fusion, weight in VARIANTS:
        ranks: list[int | None] = []
        latencies = []
        for r in queries:
            t = time.perf_counter()
            hits = retriever.search(
                retriever.query(r["title"], k=10, mode=mode),
                chunks_per_paper=1,
                fusion=fusion,
                dense_weight=weight,
            )
            latencies.append(time.perf_counter() - t)
            ids = [h.paper_id for h in hits]
            ranks.append(ids.index(r["id"]) + 1 if r["id"] in ids else None)
        n = len(ranks)
        r1 = sum(1 for x in ranks if x == 1) / n
        r10 = sum(1 for x in ranks if x is not None) / n
        mrr = sum(1 / x for x in ranks if x is not None) / n
        p50 = statistics.median(latencies) * 1000
        rows.append((name, r1, r10, mrr, p50))
    print(
        f"\n{len(queries)} title queries against {report.papers} untitled abstracts "
        f"(seed {args.seed})\n"
    )
    print("| retrieval | recall@1 | recall@10 | MRR@10 | p50 ms |")
    print("|---|---|---|---|---|")
    for name, r1, r10, mrr, p50 in rows:
        print(f"| {name} | {r1:.3f} | {r10:.3f} | {mrr:.3f} | {p50:.0f} |")


if __name__ == "__main__":
    main()

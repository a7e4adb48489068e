"""How many of a listing question's papers its sources hold ("which papers ...?": the
multi-paper recall the eval reports), for ways of ranking a listing's papers.

    AQA_DATA_DIR=<22k index> .venv/bin/python bench/listing.py data/train/listings.jsonl \
        [more question files] [--k 10]

Reads every answerable question with two or more gold papers that the answerer reads as a
listing, asks the service for its sources as `ask` would, and prints recall at k for each
variant, per file and pooled, as a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine.relevance import closeness
from app.engine.retrieve import Fusion
from app.engine.service import QAService
from app.evaluation.harness import load_questions
from app.query.question import is_listing
from core.models import TrainQuestion

VARIANTS: list[tuple[str, Fusion, float, int]] = [
    # name, fusion, dense weight, papers of the fused ranking reordered by relevance (0: none)
    ("fused ranking, convex 0.7 (the setting; before)", "convex", 0.7, 0),
    ("fused ranking, convex 0.5", "convex", 0.5, 0),
    ("fused ranking, convex 0.3", "convex", 0.3, 0),
    ("fused ranking, rrf 0.5", "rrf", 0.5, 0),
    ("convex 0.7, first 20 by relevance", "convex", 0.7, 20),
    ("convex 0.7, first 30 by relevance (shipped)", "convex", 0.7, 30),
    ("convex 0.7, first 50 by relevance", "convex", 0.7, 50),
    ("convex 0.5, first 30 by relevance", "convex", 0.5, 30),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", type=Path, nargs="+")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    service = QAService()
    at = service.retriever.open()
    recalls: dict[str, dict[str, list[float]]] = {name: {} for name, *_ in VARIANTS}
    for path in args.questions:
        questions = [
            q
            for q in load_questions(path, model=TrainQuestion)
            if q.answerable and len(q.gold) > 1 and is_listing(q.question)
        ]
        for q in questions:
            query, _ = service.read(q.question, args.k)
            gold = set(q.gold)
            for name, fusion, weight, depth in VARIANTS:
                deep = replace(query, k=max(depth, args.k))
                hits = service.retriever.search(deep, at, fusion=fusion, dense_weight=weight)
                if depth:
                    hits = sorted(hits, key=lambda h: -closeness(h.similarity, h.lexical))
                top = {h.paper_id for h in hits[: args.k]}
                recalls[name].setdefault(path.stem, []).append(len(gold & top) / len(gold))
            asked = {s.paper_id for s in service.search(q.question, k=args.k)}
            recalls.setdefault("as asked now", {}).setdefault(path.stem, []).append(
                len(gold & asked) / len(gold)
            )
    files = [p.stem for p in args.questions]
    print("| variant | " + " | ".join(files) + " | pooled |")
    print("|---|" + "---|" * (len(files) + 1))
    for name, by_file in recalls.items():
        pooled = [r for f in files for r in by_file.get(f, [])]
        cells = [
            f"{statistics.fmean(by_file[f]):.3f} ({len(by_file[f])})" if by_file.get(f) else "-"
            for f in files
        ]
        total = f"{statistics.fmean(pooled):.3f}" if pooled else "-"
        print(f"| {name} | " + " | ".join(cells) + f" | {total} |")


if __name__ == "__main__":
    main()

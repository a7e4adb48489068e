"""The best possible extractive answer beside ours: for each single-paper question with facts,
the share of its facts that the gold abstract's best 1, 2 and 3 sentences hold together.

    AQA_DATA_DIR=<index> .venv/bin/python bench/oracle.py data/eval/natural-22k.jsonl \
        [--report <eval --out folder>/report.json]

With ``--report`` (an `abstract-qa eval` report of the same set) ours is printed beside it, over
the same questions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.evaluation.harness import load_questions, normalise
from core.models import TrainQuestion
from core.settings import get_settings
from core.text import plain_text, sentence_spans
from store.index import Index


def best_share(sentences: list[str], facts: list[list[str]], k: int) -> float:
    held = [
        {i for i, variants in enumerate(facts) if any(normalise(v) in s for v in variants)}
        for s in (normalise(x) for x in sentences)
    ]
    best = 0
    for combo in itertools.combinations(range(len(held)), min(k, len(held))):
        best = max(best, len(set().union(*(held[i] for i in combo))))
    return best / len(facts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    index = Index(get_settings())
    questions = [
        q
        for q in load_questions(args.questions, model=TrainQuestion)  # a set may keep evidence
        if q.answerable and q.facts and len(q.gold) == 1
    ]
    ours = {}
    if args.report:
        data = json.loads(args.report.read_text())
        ours = {r["id"]: r["fact_coverage"] or 0.0 for r in data["results"]}
    shares: dict[int, list[float]] = {1: [], 2: [], 3: []}
    for q in questions:
        paper = index.paper(q.gold[0])
        if paper is None:
            raise SystemExit(f"{q.gold[0]} is not in the index")
        text = plain_text(paper.abstract)
        sentences = [text[s:e] for s, e in sentence_spans(text)]
        for k in shares:
            shares[k].append(best_share(sentences, q.facts, k))
    mean = {k: round(sum(v) / len(v), 3) for k, v in shares.items()}
    line = {"set": args.questions.stem, "questions": len(questions), "best": mean}
    if ours:
        line["ours"] = round(sum(ours[q.id] for q in questions) / len(questions), 3)
    print(json.dumps(line))


if __name__ == "__main__":
    main()

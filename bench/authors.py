"""Author questions at scale, over an index of the shared corpus that is already built.

    AQA_DATA_DIR=<index of ml-abstracts> .venv/bin/python bench/authors.py --questions 200

For random papers it asks "Which paper by <author> is about <title>?", the author written one of
three ways (full name, "B. Surname", "Surname et al."), through `ask()` as a user would. Prints
how often that paper comes first, the share of all returned sources that list the author, and
p50/p95 of author-filtered and filtered retrieval (query cache emptied before each call).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from corpus import CORPUS, read_records

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.engine.service import QAService  # noqa: E402
from core.models import Filters  # noqa: E402
from core.text import name_tokens, same_author  # noqa: E402


def variant(name: str, i: int) -> tuple[str, str]:
    """(how the question names the author, the phrasing around it)."""
    words = name.split()
    if i % 3 == 0 or len(words) < 2:
        return name, "Which paper by {} is about {}?"
    if i % 3 == 1:
        return f"{words[0][0]}. {words[-1]}", "Which paper by {} is about {}?"
    return words[-1], "{} et al. on {}"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=12)
    args = parser.parse_args()
    records = read_records(args.corpus)
    rng = random.Random(args.seed)
    chosen = rng.sample([r for r in records if r.get("authors")], args.questions)
    service = QAService()
    service.ask("warm up the model and the caches")
    first = listed = returned = 0
    ask_times: list[float] = []
    for i, record in enumerate(chosen):
        author = rng.choice(record["authors"])
        if len(name_tokens(author)) < 2:
            author = record["authors"][0]
        named, pattern = variant(author, i)
        question = pattern.format(named, record["title"].rstrip(".?!").lower())
        service.embedder.forget()
        t = time.perf_counter()
        answer = service.ask(question)
        ask_times.append(time.perf_counter() - t)
        first += bool(answer.sources) and answer.sources[0].paper_id == record["id"]
        for source in answer.sources:
            returned += 1
            listed += any(same_author(named, a) for a in source.authors)
    retriever = service.retriever
    lat: dict[str, list[float]] = {"author filter": [], "year+venue filter": []}
    for record in chosen:
        for label, filters in (
            ("author filter", Filters(authors=[record["authors"][0]])),
            ("year+venue filter", Filters(year_from=2015, venues=["NeurIPS", "ICML", "ICLR"])),
        ):
            service.embedder.forget()
            t = time.perf_counter()
            retriever.search(retriever.query(record["title"], filters))
            lat[label].append(time.perf_counter() - t)
    n = len(chosen)
    print("| measure | value |\n|---|---|")
    print(f"| the paper first | {first / n:.3f} ({first} of {n}) |")
    print(
        f"| sources listing the author | {listed / max(returned, 1):.3f} ({listed} of {returned}) |"
    )
    print(f"| ask p50/p95 ms | {percentile(ask_times, 0.5)}/{percentile(ask_times, 0.95)} |")
    for label, values in lat.items():
        p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
        print(f"| retrieval, {label}, p50/p95 ms | {p50}/{p95} |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {n} questions, seed {args.seed}")


if __name__ == "__main__":
    main()

"""Author filter precision over a corpus's metadata, no index needed.

    .venv/bin/python bench/author_filter.py [--pairs 2000]

For random (paper, author) pairs, the author written with a full first name, it counts the
author-paper matches the filter passes (`core.text.same_author`), how many of them are by someone
of another first name, and whether the paper passes its own author's filter; beside it the rule
before issue 21 (first initial and surname), for reference. docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from corpus import CORPUS, read_records

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.text import author_key, name_tokens, same_author  # noqa: E402

_PARTICLES = {"van", "der", "den", "de", "von", "la", "le", "di", "da", "del", "du", "dos", "ter"}


def by_initial(typed: str, name: str) -> bool:
    """The rule before issue 21: the same surname and the same first initial."""
    t, n = name_tokens(typed), name_tokens(name)
    if not t or not n or t[-1] != n[-1]:
        return False
    given = [w for w in t[:-1] if w not in _PARTICLES]
    return not given or (len(n) > 1 and n[0][0] == given[0][0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    records = read_records(args.corpus)
    named: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for record in records:
        for author in record.get("authors") or []:
            if (key := author_key(author)) is not None:
                named[key].append((author, record["id"]))
    rng = random.Random(args.seed)
    pairs: list[tuple[str, str]] = []
    while len(pairs) < args.pairs:
        record = rng.choice(records)
        if not record.get("authors"):
            continue
        author = rng.choice(record["authors"])
        first = name_tokens(author.split()[0]) if author.split() else []
        if len(author.split()) >= 2 and first and len(first[0]) > 1:
            pairs.append((author, record["id"]))
    rules: list[tuple[str, Callable[[str, str], bool]]] = [
        ("first initial and surname (before)", by_initial),
        ("compatible first name (now)", same_author),
    ]
    print("| rule | filter matches | by another first name | own paper passes |")
    print("|---|---|---|---|")
    for label, rule in rules:
        passed = other = own = 0
        for typed, paper in pairs:
            hits = [(n, p) for n, p in named[author_key(typed) or ""] if rule(typed, n)]
            passed += len(hits)
            other += sum(not same_author(typed, n) for n, _ in hits)
            own += any(p == paper for _, p in hits)
        print(f"| {label} | {passed:,} | {other:,} ({other / max(passed, 1):.1%}) | "
              f"{own:,} of {len(pairs):,} |")  # fmt: skip
    forms = [(f, typed) for typed, _ in pairs for f in _forms(typed)]
    missed = [f"{f!r} ~ {typed!r}" for f, typed in forms if not same_author(f, typed)]
    print(f"\nforms of a name that miss the name itself: {len(missed)} of {len(forms)}", *missed)


def _forms(name: str) -> list[str]:
    """How bench/authors.py writes a name: in full, "B. Surname", the surname alone."""
    words = name.split()
    return [name, f"{words[0][0]}. {words[-1]}", words[-1]]


if __name__ == "__main__":
    main()

"""The shared corpus the benchmark scripts read (never committed: ../shared/data)."""

from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/data/ml-abstracts.jsonl.gz"


def read_records(path: str | Path = CORPUS) -> list[dict[str, Any]]:
    """Every record of a gzipped JSON Lines corpus, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


FOLLOW_UPS = (
    "Which papers address this, and what do they propose?",
    "What method was proposed for it?",
    "How well does the proposed approach work?",
    "What do the authors find?",
)


def sentence_questions(records: list[dict[str, Any]], n: int, rng: random.Random) -> list[str]:
    """Questions of one or two sentences, as people type them: the problem an abstract opens
    with (its first sentence, at most 40 words) and a question about it."""
    questions = []
    for record in rng.sample(records, min(n, len(records))):
        first = re.split(r"(?<=[.!?])\s+", " ".join(str(record["abstract"]).split()))[0]
        words = first.split()[:40]
        questions.append(f"{' '.join(words).rstrip('.')}. {rng.choice(FOLLOW_UPS)}")
    return questions

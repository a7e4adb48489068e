"""The shared corpus the benchmark scripts read (never committed: ../shared/data)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared/data/ml-abstracts.jsonl.gz"


def read_records(path: str | Path = CORPUS) -> list[dict[str, Any]]:
    """Every record of a gzipped JSON Lines corpus, in file order."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]

"""Query latency over the index in AQA_DATA_DIR (or the Chroma server the settings name).

    .venv/bin/python bench/queries.py SPEC.json      # prints {"row": [p50 ms, p95 ms], ...}

run.py and scale.py run it in a child process, so that its peak memory is a query process's
alone. SPEC is {"titles": [...], "questions": [...], "rows": [...]}; a row is a mode (dense,
bm25, hybrid), optionally with a filter ("hybrid+author"), or "ask" (the titles) or
"ask (sentences)" (the questions). Every call pays for embedding its query: the query cache is
emptied before each one.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.engine.service import QAService  # noqa: E402
from core.models import Filters, Mode  # noqa: E402
from core.settings import get_settings  # noqa: E402

FILTERS = {
    "filter": Filters(year_from=2015, venues=["NeurIPS", "ICML", "ICLR"]),
    "year": Filters(year_from=2022),
    "venue": Filters(venues=["ACML"]),
    "decision": Filters(decisions=["Spotlight"]),
    "author": Filters(authors=["Sergey Levine"]),
}
"""Broad to narrow: 60% of the shared corpus's papers pass "filter", 14% "year", 3.7% "venue"
(ACML), 2% "decision" (Spotlight) and 0.4% "author"."""

ROWS = [
    "dense", "dense+filter", "bm25", "bm25+filter", "hybrid", "hybrid+filter", "hybrid+year",
    "hybrid+venue", "hybrid+decision", "hybrid+author", "ask", "ask (sentences)",
]  # fmt: skip


def percentiles(times: list[float]) -> list[float]:
    times = sorted(times)
    return [round(1000 * times[len(times) // 2], 1), round(1000 * times[int(len(times) * 0.95)], 1)]


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    service = QAService(get_settings())
    retriever = service.retriever
    service.ask("warm up the model and the caches")

    def clock(queries: list[str], call: Callable[[str], object]) -> list[float]:
        times = []
        for query in queries:
            retriever.embedder.forget()
            t = time.perf_counter()
            call(query)
            times.append(time.perf_counter() - t)
        return percentiles(times)

    def search(query: str, filters: Filters | None, mode: Mode) -> object:
        return retriever.search(retriever.query(query, filters, mode=mode))

    out: dict[str, list[float]] = {}
    for row in spec.get("rows", ROWS):
        if row == "ask":
            out[row] = clock(spec["titles"], service.ask)
        elif row == "ask (sentences)":
            out[row] = clock(spec["questions"], service.ask)
        else:
            name, _, kind = row.partition("+")
            mode = cast(Mode, name)
            filters = FILTERS[kind] if kind else None
            out[row] = clock(spec["titles"], partial(search, filters=filters, mode=mode))
    print(json.dumps(out))


if __name__ == "__main__":
    main()

"""The first question against a freshly started server: is it answered as fast as the next?

    .venv/bin/python bench/first.py --index /tmp/aqa-bench/n21958/index

Starts `abstract-qa serve` over the index and times how long it takes to answer /health (it
loads the model and the index before it accepts requests), then five questions one after the
other (paper titles, different each time, so no cache helps). Then starts `abstract-qa app` and
times how long until it says the model and the index are loaded. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from corpus import CORPUS, read_records

EXE = Path(sys.executable).parent / "abstract-qa"


def wait(check: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path) -> float:
    started = time.perf_counter()
    while not check():
        if proc.poll() is not None or time.perf_counter() - started > 600:
            raise SystemExit(f"the server did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.05)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", required=True)
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--port", type=int, default=8741)
    args = parser.parse_args()
    titles = [r["title"] for r in random.Random(11).sample(read_records(args.corpus), 5)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AQA_", "OPENAI_"))}
    env |= {"AQA_DATA_DIR": args.index, "HF_HUB_OFFLINE": "1"}
    url = f"http://127.0.0.1:{args.port}"
    rows: dict[str, str] = {}

    log = Path("/tmp/aqa-first-serve.log")
    with log.open("w") as fh:
        proc = subprocess.Popen([str(EXE), "serve", "--port", str(args.port)],
                                stdout=fh, stderr=subprocess.STDOUT, env=env)  # fmt: skip

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        rows["serve: start to first /health"] = f"{wait(healthy, proc, log):.1f} s"
        times = []
        with httpx.Client(base_url=url, timeout=120) as http:
            for title in titles:
                t = time.perf_counter()
                http.post("/ask", json={"question": title}).raise_for_status()
                times.append(1000 * (time.perf_counter() - t))
        rows["serve: questions 1-5, ms each"] = " / ".join(f"{t:.0f}" for t in times)
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    log = Path("/tmp/aqa-first-app.log")
    with log.open("w") as fh:
        proc = subprocess.Popen([str(EXE), "app", "--port", str(args.port + 1)],
                                stdout=fh, stderr=subprocess.STDOUT, env=env)  # fmt: skip
    try:
        ready = wait(lambda: "ready for questions" in log.read_text(), proc, log)
        rows["app: start to 'ready for questions'"] = f"{ready:.1f} s"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print("| measure | value |\n|---|---|")
    for key, value in rows.items():
        print(f"| {key} | {value} |")
    print(f"\n{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, index {args.index}")


if __name__ == "__main__":
    main()

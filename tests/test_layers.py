"""The layer rule (bench/layers.py): core <- store <- ingest <- app, the vendors of the store
behind it, and the providers free of both."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import ROOT


def layers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("layers", ROOT / "bench" / "layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["layers"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_the_code_keeps_its_layers() -> None:
    rule = layers()
    graph = rule.read_graph(ROOT)
    assert {"core.models", "store.index", "ingest.pipeline", "app.service"} <= set(graph.imports)
    assert rule.violations(graph) == []


def test_the_rule_catches_an_import_against_the_layers(tmp_path: Path) -> None:
    for package, source in {
        "core": "from app.service import QAService\n",
        "store": "import chromadb\nfrom core import models\n",
        "ingest": "def f():\n    from app import ui\n",
        "app": "import chromadb\n",
        "app/llm": "from store import index\n",
    }.items():
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "x.py").write_text(source)
    for name in ("service", "ui"):
        (tmp_path / "app" / f"{name}.py").write_text("")
    (tmp_path / "store" / "index.py").write_text("import bm25s\n")
    found = layers().violations(layers().read_graph(tmp_path))
    assert "core.x imports app.service: core may import only core" in found
    assert any(line.startswith("ingest.x imports app.ui") for line in found)  # inside a function
    assert "app.x imports chromadb: only the store may" in found
    assert "app.llm.x pulls in bm25s through store.index" in found
    assert not any(line.startswith("store.x") for line in found)


def test_importing_a_layer_loads_nothing_above_it() -> None:
    """What Python really loads: a provider without Chroma or BM25, ingest without the app."""
    checks = {
        "app.llm.extractive, app.llm.openai, app.llm.base": ("chromadb", "bm25s", "store"),
        "ingest.pipeline, ingest.read, ingest.chunk": ("app",),
        "store.index": ("app", "ingest"),
        "core.models, core.settings, core.text, core.tokens": ("app", "ingest", "store"),
    }
    for modules, absent in checks.items():
        code = f"import sys, {modules}; print(sorted(m for m in {absent!r} if m in sys.modules))"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        )
        assert done.stdout.strip() == "[]", f"importing {modules} loaded {done.stdout}"

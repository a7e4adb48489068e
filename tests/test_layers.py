"""The layers and the roles (pyproject's [tool.importlinter] contracts, checked by import-linter):
core <- store <- ingest <- app; inside app query <- providers <- engine <- ui, evaluation <- fronts;
only the store imports Chroma and BM25; no import circle anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def test_the_code_keeps_its_layers_and_roles() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 kept, 0 broken" in done.stdout


def test_the_contracts_catch_an_import_against_them(tmp_path: Path) -> None:
    """A copy of the tree with three bad imports: an engine module importing a front (which also
    closes a circle, since the fronts import the engine), ingest importing the app inside a
    function, and a provider importing the store."""
    for package in ("core", "store", "ingest", "app"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "app" / "engine" / "x.py").write_text("from app.fronts import cli\n")
    (tmp_path / "ingest" / "x.py").write_text("def f():\n    from app.ui import shared\n")
    (tmp_path / "app" / "providers" / "x.py").write_text("from store import index\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1
    out = done.stdout
    assert "app.engine is not allowed to import app.fronts" in out
    assert "ingest is not allowed to import app" in out
    assert "app.providers.x -> store.index" in out
    assert "Contracts: 1 kept, 4 broken." in out


def test_importing_a_layer_loads_nothing_above_it() -> None:
    """What Python really loads: a provider without Chroma or BM25, ingest without the app."""
    checks = {
        "app.providers.extractive, app.providers.openai, app.providers.base": (
            "chromadb",
            "bm25s",
            "store",
        ),
        "app.engine.service": ("app.fronts", "app.ui", "fastapi", "mcp", "streamlit"),
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

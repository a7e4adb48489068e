"""The import graph of the code, and the layer rule it must keep.

    .venv/bin/python bench/layers.py               # this checkout: edges and violations
    .venv/bin/python bench/layers.py --root DIR    # another checkout, e.g. an older commit

Layers, lowest first: ``core`` (records, settings, errors, text helpers) imports nothing of
ours; ``store`` (Chroma + BM25) imports only ``core``; ``ingest`` imports ``core`` and
``store``; ``app`` (retrieval, answering, UI, CLI, servers) stands on all three. Only the
store imports chromadb or bm25s, and nothing ``app.llm`` imports, however indirectly, pulls
either in. Every import counts, including those inside functions. Exits 1 on a violation.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("core", "store", "ingest", "app")
ALLOWED = {
    "core": {"core"},
    "store": {"core", "store"},
    "ingest": {"core", "store", "ingest"},
    "app": {"core", "store", "ingest", "app"},
}
STORE_ONLY = ("chromadb", "bm25s")


@dataclass
class Graph:
    imports: dict[str, set[str]] = field(default_factory=dict)  # module -> modules it imports
    vendors: dict[str, set[str]] = field(default_factory=dict)  # module -> STORE_ONLY it imports


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_graph(root: Path) -> Graph:
    graph = Graph()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
            name = module_name(root, path)
            ours: set[str] = set()
            vendors: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                targets: list[tuple[str, str]]
                if isinstance(node, ast.Import):
                    targets = [(alias.name, "") for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    targets = [(node.module, alias.name) for alias in node.names]
                else:
                    continue
                for target, member in targets:
                    top = target.split(".")[0]
                    if top in PACKAGES:
                        ours.add(f"{target}:{member}")
                    elif top in STORE_ONLY:
                        vendors.add(top)
            graph.imports[name] = ours
            graph.vendors[name] = vendors
    # "from app import question" imports the module app.question; "from app.models import
    # Answer" imports app.models
    for name, raw in graph.imports.items():
        resolved = set()
        for pair in raw:
            imported, member = pair.split(":")
            full = f"{imported}.{member}"
            resolved.add(full if full in graph.imports else imported)
        graph.imports[name] = resolved - {name}
    return graph


def closure(graph: Graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += sorted(graph.imports.get(module, set()))
    return seen


def violations(graph: Graph) -> list[str]:
    found = []
    for module, targets in sorted(graph.imports.items()):
        layer = module.split(".")[0]
        for target in sorted(targets):
            if target.split(".")[0] not in ALLOWED[layer]:
                found.append(f"{module} imports {target}: {layer} may import only "
                             f"{', '.join(sorted(ALLOWED[layer]))}")  # fmt: skip
        for vendor in sorted(graph.vendors[module]):
            if layer != "store":
                found.append(f"{module} imports {vendor}: only the store may")
    for module in sorted(m for m in graph.imports if m.startswith("app.llm")):
        for reached in sorted(closure(graph, module)):
            for vendor in sorted(graph.vendors.get(reached, set())):
                found.append(f"{module} pulls in {vendor} through {reached}")
    return found


def package_edges(graph: Graph) -> Counter[tuple[str, str]]:
    edges: Counter[tuple[str, str]] = Counter()
    for module, targets in graph.imports.items():
        for target in targets:
            a, b = module.split(".")[0], target.split(".")[0]
            if a != b:
                edges[a, b] += 1
    for module, vendors in graph.vendors.items():
        for vendor in vendors:
            edges[module.split(".")[0], vendor] += 1
    return edges


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args(argv)
    graph = read_graph(Path(args.root))
    print("| from | to | imports |\n|---|---|---|")
    for (a, b), n in sorted(package_edges(graph).items()):
        print(f"| {a} | {b} | {n} |")
    found = violations(graph)
    print(f"\n{len(graph.imports)} modules, {len(found)} layer violations")
    for line in found:
        print(f"- {line}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

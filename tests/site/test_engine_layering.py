"""Layering rules (docs/architecture.md): the allocation engine is plain Python, apps use each other's public
names only, and no project module takes part in an import circle. Which floor may import which is
checked by `lint-imports` (contracts in pyproject.toml)."""

import ast
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp

import dra

ROOT = Path(__file__).resolve().parents[2]
APPS = ("mirror", "accounts", "inventory", "claims", "monitoring", "health", "usage", "ops", "gpudash")
# Every package of the project: what the circle check reads.
PACKAGES = (*APPS, "dra", "devcluster")


def test_engine_imports_no_django():
    modules = sorted(f"dra.{m.name}" for m in pkgutil.iter_modules(dra.__path__))
    assert "dra.search" in modules
    # A fresh interpreter: this test process has Django loaded already.
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(sorted(n for n in sys.modules if n == 'django' or n.startswith('django.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"the engine pulled in Django: {out}"


def _private_cross_app_imports():
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    other = node.module.split(".")[0]
                    if other in APPS and other != app:
                        for alias in node.names:
                            if alias.name.startswith("_"):
                                yield f"{path.relative_to(ROOT)}: from {node.module} import {alias.name}"


def test_apps_do_not_reach_into_each_others_private_helpers():
    assert list(_private_cross_app_imports()) == []


def _import_circles():
    """Groups of project modules that import one another, directly or through others (strongly
    connected components of the import graph; function-level imports count too)."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    for start in sorted(graph.modules):
        if start in index:
            continue
        # Tarjan's algorithm, iterative: (module, its imports still to visit).
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        while work:
            module, pending = work[-1]
            for imported in pending:
                if imported not in index:
                    index[imported] = low[imported] = len(index)
                    stack.append(imported)
                    on_stack.add(imported)
                    work.append((imported, iter(sorted(graph.find_modules_directly_imported_by(imported)))))
                    break
                if imported in on_stack:
                    low[module] = min(low[module], index[imported])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        circles.append(sorted(group))
    return circles


def test_no_import_circles():
    assert _import_circles() == []


def test_no_import_contract_lets_an_import_through():
    """The arrows that ran against the floors are gone (issue 32): a contract with ignore_imports would
    let one back in unnoticed. A lower floor that needs a higher one gets a registry instead."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert {c["id"]: c.get("ignore_imports", []) for c in config["contracts"]} == {
        c["id"]: [] for c in config["contracts"]
    }

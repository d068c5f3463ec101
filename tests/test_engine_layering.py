"""Layering rules: the allocation engine is plain Python, and apps use each other's public names only."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import dra

ROOT = Path(__file__).resolve().parent.parent
APPS = ("claims", "inventory", "gpudash")


def test_engine_imports_no_django():
    modules = sorted(f"dra.{m.name}" for m in pkgutil.iter_modules(dra.__path__))
    assert "dra.search" in modules
    # A fresh interpreter: this test process has Django loaded already. Importing `dra` also
    # imports the `claims` app package, whose __init__ must stay free of Django too.
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

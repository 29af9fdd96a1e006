"""bt-repo's place in the layering: a service inside torrents/ that only the console script imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import torrents

MODULES = ["app", "api", "catalog", "cli", "db", "keys", "metrics", "routes", "tracker_client", "views"]


def test_repo_imports_no_other_service():
    code = ("import sys\n"
            + "".join(f"import torrents.repo.{m}\n" for m in MODULES)
            + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('btget', 'btserver', 'tracker', 'btswarm'))\n"
            + "print(','.join(bad))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_no_shared_module_imports_the_repo():
    shared = Path(torrents.__file__).parent
    for path in shared.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            assert not any(n.startswith("torrents.repo") for n in names), f"{path.name} imports {names}"

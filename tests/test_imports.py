"""Every module of the project imports on its own, in a fresh interpreter.

Catches circular imports and errors at import time that a test importing
modules in a lucky order would hide. The interpreters run two at a time
(the machines are small) and each test reports its own module.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torrents", "btget", "btserver", "tracker", "btswarm")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(module_name(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                 if "__pycache__" not in p.parts)


def import_alone(module: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def results() -> dict[str, subprocess.CompletedProcess]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(MODULES, pool.map(import_alone, MODULES)))


def test_every_package_is_found():
    assert set(PACKAGES) <= set(MODULES)
    assert len(MODULES) > len(PACKAGES)


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_in_a_fresh_interpreter(module, results):
    done = results[module]
    last = done.stderr.strip().splitlines()[-1:] or [""]
    assert done.returncode == 0, f"import {module} failed: {last[0]}\n{done.stderr}"

"""Every btserver module imports on its own, and none pulls in another service."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import btserver

MODULES = sorted(f"btserver.{m.name}" for m in pkgutil.iter_modules(btserver.__path__))


def test_each_module_imports_alone_and_no_other_service_is_loaded():
    code = (
        "import importlib, sys\n"
        f"for name in {MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('tracker', 'btget', 'btswarm')"
        " or m.startswith('torrents.repo'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert {"btserver.app", "btserver.cli", "btserver.layout", "btserver.seeder"} <= set(MODULES)

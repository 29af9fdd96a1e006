"""The layering, checked in this one place: who may import whom, and that every module imports.

- the shared library (torrents/, its service kit torrents.servicekit
  included) imports no deployable and not the umbrella;
- a deployable (btget, btserver, tracker, btrepo) imports no other: they
  talk over HTTP and the peer wire only;
- btswarm, the umbrella, starts the deployables as processes and imports none;
- inside bt-get, each subpackage uses only the ones its job needs (BTGET_USES): the parent's run
  (transfer) starts the workers and shows what they say; a worker and what the user sees (display)
  never reach into the run, and nothing imports the command line (btget.cli);
- importing the pure core (torrents without its service kit) pulls in
  neither aiohttp nor libtorrent;
- every module imports on its own in a fresh interpreter (circular imports
  and import-time errors that a lucky test order would hide).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torrents", "btrepo", "btget", "btserver", "tracker", "btswarm")
SERVICES = ("btget", "btserver", "tracker", "btrepo")
UMBRELLA = "btswarm"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)


def part_of(module: str) -> str | None:
    """The part a module belongs to: a service, the umbrella, 'library', or None for third-party code."""
    for service in SERVICES:
        if module == service or module.startswith(service + "."):
            return service
    if module == UMBRELLA or module.startswith(UMBRELLA + "."):
        return UMBRELLA
    if module == "torrents" or module.startswith("torrents."):
        return "library"
    return None


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file, wherever it is: top level, functions, importlib calls."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # `from btserver import app` imports the submodule btserver.app
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names if alias.name != "*"]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) in ("import_module", "__import__"))):
            found.append((node.lineno, node.args[0].value))
    return found


def violations(path: Path) -> list[str]:
    me = part_of(module_name(path))
    bad: dict[tuple[int, str], str] = {}
    for line, module in imports(path):
        other = part_of(module)
        if other is None or other == "library" or other == me:
            continue
        # the library may import no part; a service no other part; the umbrella no service
        where = f"{path.relative_to(ROOT)}:{line}"
        bad.setdefault((line, other), f"{where}: imports {module} ({me} must not import {other})")
    return [bad[k] for k in sorted(bad)]


FILES = source_files()


def test_the_tree_is_there():
    names = {module_name(p) for p in FILES}
    assert {"torrents.bencoding", "torrents.metainfo", "torrents.dataset", "torrents.config"} <= names
    assert all((ROOT / pkg / "__init__.py").is_file() for pkg in PACKAGES)


@pytest.mark.parametrize("path", FILES, ids=[module_name(p) for p in FILES])
def test_layering(path):
    assert violations(path) == []


def check_cases(tmp_path: Path, checker: Callable[[Path], list[str]], cases: dict[str, tuple[str, str | None]]) -> None:
    """Each made-up module (path: (source, the one violation expected or None)) written in a scratch tree, and
    what `checker` says of it."""
    for rel, (source, expected) in cases.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        assert checker(path) == ([expected] if expected else []), rel


def test_the_checker_catches_what_it_should(tmp_path, monkeypatch):
    # the rule itself, on made-up modules placed in a scratch tree
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    lib, tracker, umbrella = "library must not import", "tracker must not import", "btswarm must not import"
    cases = {
        "torrents/metainfo.py": ("from btget import plan\n",
                                 f"torrents/metainfo.py:1: imports btget ({lib} btget)"),
        "torrents/auth.py": ("from btrepo import db\n",
                             f"torrents/auth.py:1: imports btrepo ({lib} btrepo)"),
        "torrents/servicekit/web.py": ("import btserver.app\n",
                                       f"torrents/servicekit/web.py:1: imports btserver.app ({lib} btserver)"),
        "tracker/app.py": ("def f():\n    import btserver.holdings\n",
                           f"tracker/app.py:2: imports btserver.holdings ({tracker} btserver)"),
        "btrepo/views.py": ("from tracker import protocol\n",
                            "btrepo/views.py:1: imports tracker (btrepo must not import tracker)"),
        "btswarm/up.py": ("import importlib\nimportlib.import_module('tracker.cli')\n",
                          f"btswarm/up.py:2: imports tracker.cli ({umbrella} tracker)"),
        "btget/resolve/plan.py": ("import btswarm\n",
                                  "btget/resolve/plan.py:1: imports btswarm (btget must not import btswarm)"),
        # allowed: the library, the module's own package (relative too), third-party code
        "btget/cli.py": ("from torrents import metainfo\nfrom . import plan\nimport aiohttp\n", None),
        "btrepo/app.py": ("from . import db\nfrom torrents.servicekit import web\n", None),
    }
    check_cases(tmp_path, violations, cases)


MODULES = sorted(module_name(p) for p in FILES)
CORE = [m for m in MODULES if part_of(m) == "library" and not m.startswith("torrents.servicekit")]


def test_the_core_library_loads_neither_aiohttp_nor_libtorrent():
    code = (f"import sys\nimport {', '.join(CORE)}\n"
            "print(sorted(m for m in ('aiohttp', 'libtorrent') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_public_fetch_starts_without_the_certificate_and_token_libraries():
    """cryptography and PyJWT cost every bt-get's start (and each worker's) a tenth of a CPU-second; only a
    restricted dataset or a token check needs them (btget/resolve/peercert.py, torrents/tokens.py)."""
    code = ("import sys\nimport btget.cli, btget.worker.process\n"
            "print(sorted(m for m in ('cryptography', 'jwt') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# Forked from one interpreter that has loaded the third-party modules ours import (and none of ours): each
# module still imports alone, ours first, at a tenth of the cost of an interpreter each (21 s for 120 modules).
IMPORT_EACH = """
import json, os, sys, traceback
for name in sys.argv[2:]:
    try:
        __import__(name)
    except Exception:
        pass  # an optional dependency: the module that needs it says so when it imports alone
results = {}
for module in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(module)
            error = ""
        except BaseException:
            error = traceback.format_exc()
        os.write(write, error.encode())
        os._exit(1 if error else 0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        error = pipe.read().decode()
    results[module] = (os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), error)
print(json.dumps(results))
"""


def third_party() -> list[str]:
    """Every module outside ours and the standard library that one of ours imports."""
    return sorted({m for p in FILES for _, m in imports(p)
                   if part_of(m) is None and m.split(".")[0] not in sys.stdlib_module_names})


@pytest.fixture(scope="module")
def imported() -> dict[str, tuple[int, str]]:
    out = subprocess.run([sys.executable, "-c", IMPORT_EACH, json.dumps(MODULES), *third_party()], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    return {m: tuple(r) for m, r in loaded.items()}


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_in_a_fresh_interpreter(module, imported):
    code, error = imported[module]
    last = error.strip().splitlines()[-1:] or [""]
    assert code == 0, f"import {module} failed: {last[0]}\n{error}"


# --- inside bt-get: its subpackages by job ---------------------------------------------------------------
# What each may import of the others; the top level (config, errors, events: the messages) is open to all.
BTGET_USES = {
    "resolve": set(),  # before any transfer (what TARGET names, the token, the plan): knows nothing of how it runs
    "display": {"resolve"},  # what the user sees: fed events, never the run's or a worker's insides
    "worker": {"resolve", "swarmread.streaming"},  # moves bytes (and uses the piece map): decides and draws nothing
    "swarmread": {"resolve", "worker"},  # a session of its own, over a worker's share and its state
    "transfer": {"resolve", "worker", "display"},  # the parent: starts the workers, decides, shows
}


def btget_violations(path: Path) -> list[str]:
    here = module_name(path).split(".")
    mine = here[1] if len(here) > 2 else None  # None: the top level (cli and the shared few)
    found = imports(path)
    # `from btget.swarmread import streaming` is judged as btget.swarmread.streaming, the most specific name
    named = {(line, m) for line, m in found}
    bad: dict[tuple[int, str], str] = {}
    for line, module in found:
        parts = module.split(".")
        if parts[0] != "btget" or len(parts) < 2 or any(n == line and o.startswith(module + ".") for n, o in named):
            continue
        other = parts[1]
        where = f"{path.relative_to(ROOT)}:{line}: imports {module}"
        if other == "cli" and here != ["btget", "cli"]:
            bad.setdefault((line, other), f"{where} (nothing imports the command line)")
        elif mine is not None and other in BTGET_USES and other != mine:
            allowed = BTGET_USES[mine]
            if other not in allowed and ".".join(parts[1:3]) not in allowed:
                bad.setdefault((line, other), f"{where} (btget.{mine} must not import btget.{other})")
    return [bad[k] for k in sorted(bad)]


BTGET_FILES = [p for p in FILES if module_name(p).startswith("btget.")]


@pytest.mark.parametrize("path", BTGET_FILES, ids=[module_name(p) for p in BTGET_FILES])
def test_btget_subpackages_keep_to_their_jobs(path):
    assert btget_violations(path) == []


def test_btget_has_the_subpackages_the_rule_names():
    assert all((ROOT / "btget" / sub / "__init__.py").is_file() for sub in BTGET_USES)
    assert {p.name for p in (ROOT / "btget").iterdir() if (p / "__init__.py").is_file()} == set(BTGET_USES)


def test_the_btget_checker_catches_what_it_should(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    cases = {
        "btget/display/readout.py": ("from btget.worker import sources\n",
                                     "btget/display/readout.py:1: imports btget.worker.sources "
                                     "(btget.display must not import btget.worker)"),
        "btget/worker/process.py": ("def f():\n    from btget.transfer.runstate import step\n",
                                    "btget/worker/process.py:2: imports btget.transfer.runstate.step "
                                    "(btget.worker must not import btget.transfer)"),
        "btget/worker/stall.py": ("from btget.swarmread import serve\n",
                                  "btget/worker/stall.py:1: imports btget.swarmread.serve "
                                  "(btget.worker must not import btget.swarmread)"),
        "btget/resolve/client.py": ("from btget import cli\n",
                                    "btget/resolve/client.py:1: imports btget.cli (nothing imports the command line)"),
        "btget/worker/webseeduse.py": ("from btget.swarmread import streaming, serve\n",
                                       "btget/worker/webseeduse.py:1: imports btget.swarmread.serve "
                                       "(btget.worker must not import btget.swarmread)"),
        # allowed: the top level, its own subpackage, what its job needs
        "btget/worker/peerevents.py": ("from btget import events\nfrom . import reannounce\n"
                                       "from btget.swarmread.streaming import PieceMap\n", None),
        "btget/transfer/download.py": ("from btget.worker.process import run\nfrom btget.display import result\n",
                                       None),
        "btget/cli.py": ("from btget.swarmread import serve\n", None),
    }
    check_cases(tmp_path, btget_violations, cases)


# --- the benchmarks and the pure cores ------------------------------------------------------------------
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def script_violations(path: Path) -> list[str]:
    """A benchmark runs the deployables as processes (bt-get, bt-server ...) and may use the library and the
    umbrella (btswarm: federations, shaping, the test bed); never a deployable's insides or the tests'."""
    bad = []
    for line, module in imports(path):
        other = part_of(module)
        if other in SERVICES or module == "tests" or module.startswith("tests."):
            bad.append(f"{path.relative_to(ROOT)}:{line}: imports {module}")
    return sorted(set(bad))


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_a_benchmark_imports_no_deployable(path):
    assert script_violations(path) == []


# Parsing, planning and policy, apart from I/O: each loads the standard library and other pure modules only.
PURE = ["btget.transfer.runstate", "btget.transfer.webseeds", "btget.transfer.ratecap", "btget.transfer.sitechoice",
        "btget.worker.sources", "btget.worker.reannounce", "btget.worker.siteshare", "btget.worker.stall",
        "btget.worker.steering", "btget.resolve.plan", "btget.resolve.target", "btget.resolve.targets",
        "btget.resolve.reach", "btget.display.readout", "btget.display.result", "btget.display.tables",
        "btget.swarmread.streaming",
        "tracker.handout", "tracker.siteseeds", "tracker.protocol",
        "btrepo.identity", "btrepo.rights", "btrepo.served", "btserver.layout", "btserver.policy", "btserver.stuck",
        "btswarm.shaping", "btswarm.delayline", "btswarm.topology"]


def test_the_pure_modules_load_the_standard_library_only():
    code = (f"import sys\nbefore = set(sys.modules)\nimport {', '.join(PURE)}\n"
            "print(' '.join(sorted({m.split('.')[0] for m in set(sys.modules) - before})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    ours = set(PACKAGES)
    assert sorted(loaded - ours - set(sys.stdlib_module_names)) == []

"""A site's own storage door as a web seed: Debian's real XRootD server (XrdHttp) in front of the files.

XRootD 5.5.3 answers the first of two requests written at once and holds the
second until more bytes arrive; libtorrent writes a web seed several at once
and waited `urlseed_timeout` (20 s) each time: 67-90 s for a 30-file dataset
that nginx serves in 4.3 s, and a door dropped after a stall. bt-get asks
every http web seed through its relay (btget/worker/doorrelay.py), one request at a
time per door connection.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.btget.conftest import make_dataset
from tests.btget.getsupport import bt_get_json, same_bytes
from tests.support import free_port, wait_for

pytestmark = pytest.mark.slow
XROOTD = shutil.which("xrootd")
MiB = 2**20


SYSTEM_CAS = Path("/etc/ssl/certs/ca-certificates.crt")


@pytest.fixture
def xrootd_door(procs):
    """xrootd_door(root) → 'http://127.0.0.1:PORT/': a real xrootd serving a copy of `root` (URL + PATH is
    root/PATH) over HTTP. `extra`: more configuration lines, `{home}` standing for its directory; `files`:
    name → text written there; `ca`: a CA its https clients (libcurl, e.g. the scitokens plugin's key
    fetches) trust besides the system's: the system bundle with it, bind-mounted over the system's path
    in a mount namespace of the door's own (root only), since libcurl there reads no variable for it."""
    if XROOTD is None:
        pytest.skip("needs Debian's xrootd-server (scripts/install-system-deps.sh)")
    made, started = [], []

    def start(root: Path, *, extra: str = "", files: dict[str, str] | None = None, ca: Path | None = None) -> str:
        # xrootd will not run as root: as root it is started as nobody, which cannot read pytest's
        # 0700 temporary directories, so it serves a copy in a directory of its own.
        home = Path(tempfile.mkdtemp(prefix="btswarm-xrootd-"))
        made.append(home)
        shutil.copytree(root, home / "data")
        port, http = free_port("127.0.0.1"), free_port("127.0.0.1")
        (home / "xrootd.cfg").write_text(f"""all.export /
oss.localroot {home}/data
all.adminpath {home}/admin
all.pidpath {home}/admin
xrd.port {port}
xrd.protocol XrdHttp:{http} libXrdHttp.so
http.listingdeny true
""" + extra.replace("{home}", str(home)))
        for name, text in (files or {}).items():
            (home / name).write_text(text.replace("{home}", str(home)))
        (home / "cache").mkdir()  # $XDG_CACHE_HOME: the plugin's key cache
        argv = ["env", f"XDG_CACHE_HOME={home / 'cache'}", XROOTD, "-c", str(home / "xrootd.cfg"), "-l",
                str(home / "xrootd.log"), "-n", "door"]
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", "nobody:nogroup", str(home)], check=True)
            os.chmod(home, 0o755)
            argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]
        if ca is not None:
            if os.geteuid() != 0:
                pytest.skip("a door trusting a test CA needs root (a mount namespace)")
            bundle = home / "cas.pem"
            bundle.write_bytes(SYSTEM_CAS.read_bytes() + ca.read_bytes())
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f'mount --bind "$0" {SYSTEM_CAS} && exec "$@"', str(bundle), *argv]
        proc = procs.start(f"xrootd-{http}", argv, cwd=str(home))
        started.append(proc)
        wait_for(lambda: _answers(http) or proc.popen.poll() is not None, timeout=30, what="xrootd's HTTP door")
        assert proc.popen.poll() is None, f"xrootd exited {proc.popen.returncode}: {proc.log()}"
        return f"http://127.0.0.1:{http}/"

    yield start
    for proc in started:  # before its directory goes
        proc.stop()
    for home in made:
        shutil.rmtree(home, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_an_xrootd_door_that_does_not_pipeline_serves_a_whole_dataset_without_a_stall(xrootd_door, tmp_path):
    # 30 files: most pieces span two files, and libtorrent asks for both parts in one write.
    ds = make_dataset(tmp_path / "made", 30, 16 * MiB)
    door = xrootd_door(ds.data)
    # A stall is 20 s without a byte (urlseed_timeout): --stall-timeout 15 makes one exit 4.
    result, doc = bt_get_json(str(ds.torrent), "-o", str(tmp_path / "out"), "--web-seed", door,
                              "--stall-timeout", "15", timeout=180)
    assert result.returncode == 0, result.stderr
    for f in ds.meta.files:
        assert same_bytes(ds.root / f.lfn, tmp_path / "out" / ds.name / f.lfn), f.lfn
    # The bytes are the door's, named by the door (not by the relay's loopback port), and it was never
    # dropped for pieces that failed their check.
    assert doc["sources"] == {f"web seed {door[len('http://'):-1]}": doc["bytes_downloaded"]}, doc["sources"]
    assert doc["hash_failures"] == 0 and "banned" not in result.stderr

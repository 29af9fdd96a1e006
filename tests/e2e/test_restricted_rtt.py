"""A member's fetch across a 100 ms round trip, its peer certificate renewed mid-fetch (issue 45).

`btswarm up --hosts --restricted`: the tracker and repository on https on the services' host, a site on
its own host, a T3 host; each uplink's delay line adds half the round trip, so the site and the T3 are
100 ms apart. The repository issues T3 certificates for 15 s: the T3's worker asks it again at two thirds
of that, mid-fetch (the site's uplink is slow enough for the fetch to outlive the first certificate), and
new TLS handshakes across the delay lines present the renewed one. The loopback twin of this, on raw
sessions, is tests/e2e/test_sslwire.py::test_renewed_mid_fetch; the repository's renewal on loopback,
tests/e2e/test_restricted_fetch.py::test_renewed_from_the_repository_mid_fetch.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import pytest

from tests.e2e.conftest import bt_get_on, result, same_as_source, start_federation
from tests.support import command, need_root, stopped_cleanly
from torrents import peerca

pytestmark = pytest.mark.slow

LIFETIME = 15  # s: a T3 certificate's, from the repository


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    need_root()  # the 100 ms round trip is the hosts test bed's delay lines: network namespaces, a bridge, tc
    tmp = tmp_path_factory.mktemp("restricted-rtt")
    fed = start_federation(tmp, "--hosts", "--restricted", "--sites", "1", "--t3-hosts", "1", "--sample-files", "6",
                           "--sample-size", "24M", "--heartbeat", "1s", "--site-link", "8mbit/50ms",
                           "--client-link", "100mbit/50ms", env={"BTSWARM_REPO_PEER_CERT_LIFETIME": f"{LIFETIME}s"})
    yield fed
    stopped_cleanly(fed)


def test_a_member_s_certificate_renewed_mid_fetch_at_100ms(fed, tmp_path):
    assert [h.link.rtt for h in fed.hosts if h.name in ("site1", "t3-1")] == [0.050, 0.050]
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "run"), "XDG_STATE_HOME": str(tmp_path / "state")}
    (tmp_path / "run").mkdir(mode=0o700)
    got = subprocess.run([command("btswarm"), "token", "--state", str(fed.state)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, **env})
    assert got.returncode == 0, got.stderr
    started = dt.datetime.now(dt.timezone.utc)
    code, doc, err = result(bt_get_on(fed, "t3-1", tmp_path / "out", "--config", str(fed.ready.members.config),
                                      "--workers", "1", "--no-web-seeds", env=env))
    took = dt.datetime.now(dt.timezone.utc) - started
    assert code == 0, err[-3000:]
    assert took > dt.timedelta(seconds=LIFETIME), took  # it outlived the first certificate
    assert same_as_source(fed, tmp_path / "out" / fed.dataset)
    assert doc["sources"].get("site1", 0) > 0, doc["sources"]
    # The certificate on disk is a renewal: the first, asked for before any transfer, is valid from a
    # quarter of its life before it was issued, within a second or two of `started`; a renewal is issued
    # two thirds of its life after the first, or later.
    cert = (tmp_path / "state" / "btswarm" / "get" / "peer" / (fed.dataset.replace(":", "_") + ".pem")).read_bytes()
    assert peerca.load_cert(cert).not_valid_before_utc > started + dt.timedelta(seconds=LIFETIME / 6), \
        peerca.load_cert(cert).not_valid_before_utc

"""btswarm/peerpki.py: the local federation's peer CA and its sites' certificates, on disk."""

from __future__ import annotations

import datetime as dt
import stat

from btswarm import peerpki
from torrents import peerca

NOW = dt.datetime(2026, 12, 7, 12, 0, tzinfo=dt.timezone.utc)


def test_made_once_kept_and_renewed_when_due(tmp_path):
    pki = tmp_path / "pki"
    files = peerpki.ensure(pki, ["site1", "site2"], NOW)
    assert sorted(files) == ["site1", "site2"]
    ca = (pki / "peer-ca.pem").read_bytes()
    for site, f in files.items():
        peerca.check_usable(f.cert.read_bytes(), f.key.read_bytes(), ca, "any:dataset", NOW)
        assert peerca.cert_names(f.cert.read_bytes()) == ("*",)
        assert stat.S_IMODE(f.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((pki / "peer-ca.key").stat().st_mode) == 0o600
    first = files["site1"].cert.read_bytes()
    # A second `btswarm up` the next day: the same CA, the same certificates.
    peerpki.ensure(pki, ["site1", "site2"], NOW + dt.timedelta(days=1))
    assert (pki / "peer-ca.pem").read_bytes() == ca and files["site1"].cert.read_bytes() == first
    # Past 2/3 of its life: a new certificate for the same key, from the same CA.
    key = files["site1"].key.read_bytes()
    later = peerca.renew_at(first) + dt.timedelta(seconds=1)
    peerpki.ensure(pki, ["site1"], later)
    renewed = files["site1"].cert.read_bytes()
    assert renewed != first and files["site1"].key.read_bytes() == key
    peerca.check_usable(renewed, key, ca, "any:dataset", later)


def test_a_t3_certificate_from_a_csr(tmp_path):
    pki = tmp_path / "pki"
    peerpki.ensure(pki, [], NOW)
    key = peerca.new_key()
    issued = peerpki.issue_t3(pki, peerca.new_csr(key, ["atlas:x"]), NOW)
    peerca.check_usable(issued.cert, key, (pki / "peer-ca.pem").read_bytes(), "atlas:x", NOW)


def test_site_configs_name_their_files(tmp_path):
    from btswarm import topology
    files = peerpki.ensure(tmp_path / "pki", ["site1"], NOW)
    fed = topology.Layout(state=tmp_path, data=tmp_path, tracker_port=6969, repo_port=8080,
                          sites=(topology.Site("site1", "127.0.0.2", 8700, 6881, "s" * 32),),
                          peer_files={"site1": tuple(files["site1"])})
    server = topology.configs(fed)["site1"]["server"]
    assert (server["peer_ca"], server["peer_cert"], server["peer_key"]) == tuple(str(p) for p in files["site1"])

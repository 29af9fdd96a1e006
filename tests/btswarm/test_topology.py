"""The one-host federation layout: addresses, ports and the configs each part reads."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from btswarm import topology
from btswarm.ready import RseInfo, SiteInfo
from btrepo.config import RepoConfig
from btserver.config import ServerConfig
from torrents.config import load_section
from torrents.errors import BtswarmError
from tracker.config import TrackerConfig


def layout(tmp_path: Path, n: int = 3) -> topology.Layout:
    sites = tuple(topology.Site(topology.site_name(i), topology.site_ip(i), 7010 + 2 * i, 7011 + 2 * i, f"secret-{i}",
                            7520 + i) for i in range(n))
    return topology.Layout(state=tmp_path / "state", data=tmp_path / "data", tracker_port=7000, repo_port=7001,
                       sites=sites, idle_ttl=30.0)


def test_each_site_has_its_own_loopback_address():
    assert [topology.site_ip(i) for i in range(3)] == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    with pytest.raises(ValueError):
        topology.site_ip(250)


def test_every_written_config_loads_and_agrees_on_secrets_and_urls(tmp_path):
    fed = layout(tmp_path)
    for label, sections in topology.configs(fed).items():
        path = tmp_path / f"{label}.toml"
        path.write_text(topology.toml(sections))
        if label == "tracker":
            tracker = load_section("tracker", TrackerConfig, path, environ={})
            assert tracker.site_secrets == {"site1": "secret-0", "site2": "secret-1", "site3": "secret-2"}
            assert tracker.listen == "127.0.0.1:7000"
            assert tracker.repo == "http://127.0.0.1:7001"
        elif label == "repo":
            repo = load_section("repo", RepoConfig, path, environ={})
            assert repo.site_secrets["site3"] == "secret-2"
            assert repo.tracker == "http://127.0.0.1:7000"
        else:
            i = int(label[4:]) - 1
            server = load_section("server", ServerConfig, path, environ={})
            assert server.site == label
            assert server.secret == f"secret-{i}"
            assert server.peer_listen == f"127.0.0.{i + 2}:{7011 + 2 * i}"
            assert server.web_listen == f"127.0.0.{i + 2}:{7520 + i}"  # every site is also a web seed
            assert server.roots == (str(tmp_path / "data"),)
            assert server.idle_ttl == 30.0


def test_toml_escapes_strings():
    text = topology.toml({"server": {"site": 'we"ird\\name', "roots": ["/a b", "/c"]}})
    assert tomllib.loads(text)["server"] == {"site": 'we"ird\\name', "roots": ["/a b", "/c"]}


def test_services_start_tracker_and_repo_before_sites(tmp_path):
    services = topology.services(layout(tmp_path, 2), Path("/venv/bin"))
    assert [s.label for s in services] == ["tracker", "repo", "site1", "site2"]
    assert services[2].argv[:2] == ("/venv/bin/bt-server", "run")
    assert services[2].health_url == "http://127.0.0.2:7010/healthz"


def test_ready_document_names_every_endpoint(tmp_path):
    doc = topology.ready_document(layout(tmp_path, 2), ["ds1"])
    assert doc.tracker == "http://127.0.0.1:7000/announce"
    assert doc.repo == "http://127.0.0.1:7001"
    assert doc.sites[1] == SiteInfo("site2", "127.0.0.3:7013", "http://127.0.0.3:7012", "http://127.0.0.3:7521")
    assert doc.datasets == ("ds1",)


def test_with_rucio_each_site_reads_its_own_rse_and_no_roots(tmp_path):
    rses = tuple((f"site{i + 1}", f"SITE{i + 1}_ABC123", tmp_path / "state" / "rse" / f"site{i + 1}") for i in range(2))
    rucio = topology.RucioPlan(url="http://127.0.0.1:7100", root=tmp_path / "rucio", password_file=tmp_path / "pw",
                           scope="demo", rses=rses, refresh=2.0)
    fed = dataclasses.replace(layout(tmp_path, n=2), rucio=rucio)
    for i, name in enumerate(("site1", "site2")):
        path = tmp_path / f"{name}.toml"
        path.write_text(topology.toml(topology.configs(fed)[name]))
        server = load_section("server", ServerConfig, path, environ={})
        prefix = rses[i][2]
        assert server.roots == ()
        assert (server.rucio.server, server.rucio.rse, server.rucio.datasets, server.rucio.refresh) == \
            ("http://127.0.0.1:7100", f"SITE{i + 1}_ABC123", ("demo:*",), 2.0)
        assert server.rucio.pfn_map == {f"file://localhost{prefix}/": f"{prefix}/"}
        assert server.rucio.password_file == str(tmp_path / "pw")
    doc = topology.ready_document(fed, ["demo:ds"])
    assert doc.rucio.rses["site2"] == RseInfo("SITE2_ABC123", rses[1][2])


def test_two_trackers_share_our_redis_and_every_site_knows_both(tmp_path):
    import dataclasses

    fed = dataclasses.replace(layout(tmp_path, 2), more_tracker_ports=(7002,), redis_port=7009)
    configs = topology.configs(fed)
    for label, port in (("tracker", 7000), ("tracker2", 7002)):
        path = tmp_path / f"{label}.toml"
        path.write_text(topology.toml(configs[label]))
        t = load_section("tracker", TrackerConfig, path, environ={})
        assert (t.listen, t.store, t.redis_url) == (f"127.0.0.1:{port}", "redis", "redis://127.0.0.1:7009/0")
    path = tmp_path / "site1.toml"
    path.write_text(topology.toml(configs["site1"]))
    site = load_section("server", ServerConfig, path, environ={})
    assert site.tracker_urls() == ("http://127.0.0.1:7000", "http://127.0.0.1:7002")
    services = topology.services(fed, Path("/bin"))
    assert [s.label for s in services][:3] == ["redis", "tracker", "tracker2"]
    assert services[0].health_url == "redis://127.0.0.1:7009/0"
    assert "--save" in services[0].argv and str(fed.state / "redis") in services[0].argv
    doc = topology.ready_document(fed, ["ds"])
    assert doc.trackers == ("http://127.0.0.1:7000/announce", "http://127.0.0.1:7002/announce")
    assert doc.redis == "redis://127.0.0.1:7009/0"
    # Joining a Redis that is already there: none of ours is started.
    joined = dataclasses.replace(fed, redis_port=0, redis_url="redis://127.0.0.1:6400/3")
    assert [s.label for s in topology.services(joined, Path("/bin"))][0] == "tracker"
    assert topology.configs(joined)["tracker2"]["tracker"]["redis_url"] == "redis://127.0.0.1:6400/3"


def test_web_seed_urls_from_the_command_line_reach_each_sites_config(tmp_path):
    door = "http://127.0.0.1:1094/store/{dataset}/{lfn}"
    own = "https://door2.example:2880/atlas/{dataset}/{lfn}"
    names = ["site1", "site2", "site3"]
    urls = topology.web_seed_urls([door, f"site2={own}"], names)
    assert urls == {"site1": (door,), "site2": (door, own), "site3": (door,)}
    fed = dataclasses.replace(layout(tmp_path), web_seed_urls=topology.web_seed_urls([f"site3={own}"], names))
    for label, sections in topology.configs(fed).items():
        if label.startswith("site"):
            path = tmp_path / f"{label}.toml"
            path.write_text(topology.toml(sections))
            server = load_section("server", ServerConfig, path, environ={})
            assert server.web_seed_urls == ((own,) if label == "site3" else ()), label


@pytest.mark.parametrize("value, problem", [
    ("site9=http://h/{dataset}/{lfn}", "--web-seed-url: 'site9=http://h/{dataset}/{lfn}': no site 'site9' "
                                       "(the sites are site1, site2)"),
    ("ftp://h/{dataset}/{lfn}", "--web-seed-url: 'ftp://h/{dataset}/{lfn}': not an http:// or https:// URL"),
])
def test_a_bad_web_seed_url_is_refused_before_anything_starts(value, problem):
    with pytest.raises(BtswarmError) as info:
        topology.web_seed_urls([value], ["site1", "site2"])
    assert str(info.value) == problem


def test_the_t3_is_a_t3_in_the_tracker_and_repository_configs(tmp_path):
    t3 = topology.Site(topology.T3_NAME, topology.T3_IP, 7100, 7101, "t3-secret")
    configs = topology.configs(dataclasses.replace(layout(tmp_path, 2), t3=t3))
    for label, section, cls in (("tracker", "tracker", TrackerConfig), ("repo", "repo", RepoConfig)):
        path = tmp_path / f"{label}.toml"
        path.write_text(topology.toml(configs[label]))
        loaded = load_section(section, cls, path, environ={})
        assert loaded.site_kinds == {"t3": "T3"}
        assert [loaded.kind_of(s) for s in ("site1", "site2", "t3")] == ["T2", "T2", "T3"]
    assert configs["t3"]["server"]["kind"] == "T3"


def test_redis_replicas_and_sentinels_and_the_trackers_follow_the_master(tmp_path):
    import dataclasses

    fed = dataclasses.replace(layout(tmp_path, 2), more_tracker_ports=(7002,), redis_port=7009,
                              redis_replica_ports=(7780,), sentinel_ports=(7790, 7791, 7792))
    path = tmp_path / "tracker.toml"
    path.write_text(topology.toml(topology.configs(fed)["tracker"]))
    t = load_section("tracker", TrackerConfig, path, environ={})
    assert (t.redis_sentinels, t.redis_master) == (("127.0.0.1:7790", "127.0.0.1:7791", "127.0.0.1:7792"), "btswarm")
    services = {s.label: s for s in topology.services(fed, Path("/venv/bin"))}
    assert list(services)[:5] == ["redis", "redis-replica1", "sentinel1", "sentinel2", "sentinel3"]
    replica = services["redis-replica1"].argv
    # A data server asks the sentinels its role before it starts (btswarm/redisnode.py), then is redis-server.
    assert replica[:3] == ("/venv/bin/python", "-m", "btswarm.redisnode") and "--me=127.0.0.1:7780" in replica
    command = replica[replica.index("--") + 1:]
    assert command[0] == "redis-server" and command[-3:] == ("--replicaof", "127.0.0.1", "7009")
    assert services["sentinel2"].argv[-1] == "--sentinel"
    assert services["sentinel2"].health_url == "redis://127.0.0.1:7791/0"
    # One replica: the master does not wait for it to write (losing it would stop every write).
    assert "--min-replicas-to-write" not in services["redis"].argv
    two = dataclasses.replace(fed, redis_replica_ports=(7780, 7781))
    argv = {s.label: s.argv for s in topology.services(two, Path("/venv/bin"))}["redis"]
    assert argv[argv.index("--min-replicas-to-write") + 1] == "1"


def test_restricted_every_config_loads_and_names_the_same_ca_issuer_and_scopes(tmp_path):
    """--restricted: the tracker and repository on https from the peer CA, the same [access] everywhere (the
    member's bt-get configuration too), the repository signing T3s' requests."""
    from btget.config import GetConfig
    from torrents import access

    pki = tmp_path / "pki"
    members = topology.Members(("data08_cos",), "https://btswarm.test", pki / "peer-ca.pem", pki / "peer-ca.key",
                               {label: (pki / f"{label}.pem", pki / f"{label}.key")
                                for label in ("tracker", "repo", "issuer")})
    fed = dataclasses.replace(layout(tmp_path, 2), members=members, issuer_port=7770, t3=None)
    assert (fed.tracker_url, fed.repo_url, fed.issuer_url) == (
        "https://127.0.0.1:7000", "https://127.0.0.1:7001", "https://127.0.0.1:7770")
    wanted = access.AccessConfig(restricted=("data08_cos",), issuers={fed.issuer_url: "https://btswarm.test"},
                                 ca_file=str(pki / "peer-ca.pem"))
    for label, sections in topology.configs(fed).items():
        path = tmp_path / f"{label}.toml"
        path.write_text(topology.toml(sections))
        if label != "tracker":
            assert access.load(path, environ={}) == wanted, label
        if label == "tracker":
            tracker = load_section("tracker", TrackerConfig, path, environ={})
            assert (tracker.tls_cert, tracker.peer_ca, tracker.repo) == (
                str(pki / "tracker.pem"), str(pki / "peer-ca.pem"), "https://127.0.0.1:7001")
        elif label == "repo":
            repo = load_section("repo", RepoConfig, path, environ={})
            assert (repo.tls_cert, repo.peer_ca_key, repo.tracker) == (
                str(pki / "repo.pem"), str(pki / "peer-ca.key"), "https://127.0.0.1:7000")
        elif label == "get":
            get = load_section("get", GetConfig, path, environ={})
            assert (get.repo, get.ca_file, get.peer_ca, get.peer_cert) == (
                "https://127.0.0.1:7001", str(pki / "peer-ca.pem"), str(pki / "peer-ca.pem"), "")
        else:
            server = load_section("server", ServerConfig, path, environ={})
            assert (server.ca_file, server.tracker) == (str(pki / "peer-ca.pem"), "https://127.0.0.1:7000")
    issuer = next(s for s in topology.services(fed, Path("/venv/bin")) if s.label == "issuer")
    assert issuer.argv[-3:] == ("127.0.0.1:7770", str(pki / "issuer.pem"), str(pki / "issuer.key"))
    # Without --restricted: no [access], no https, no issuer, no member's configuration.
    plain = topology.configs(layout(tmp_path, 2))
    assert "get" not in plain and not any("access" in sections for sections in plain.values())
    assert "issuer" not in [s.label for s in topology.services(layout(tmp_path, 2), Path("/venv/bin"))]


@pytest.mark.parametrize("restrict, names, expected", [
    ((), ["data08_cos:ds1", "user:ds2", "plain.ds3"], ("data08_cos", "user")),
    (("cms:Run2018*",), ["cms:Run2018A", "cms:Run2017B"], ("cms:Run2018*",)),
    ((), ["plain.ds"], "--restricted: no dataset is named SCOPE:NAME, and only those can be restricted "
                       "(name the directories in --data so, or give --rucio)"),
    (("atlas",), ["cms:Run2018A"], "--restrict: atlas restricts none of the datasets (cms:Run2018A): a restricted "
                                   "dataset is named SCOPE:NAME"),
    (("at las",), ["cms:x"], "--restrict: restricted: at las: not a Rucio scope"),
])
def test_restricted_scopes(restrict, names, expected):
    from btswarm.up import restricted_scopes
    if isinstance(expected, tuple):
        assert restricted_scopes(restrict, names) == expected
    else:
        with pytest.raises(BtswarmError) as err:
            restricted_scopes(restrict, names)
        assert str(err.value).startswith(expected)

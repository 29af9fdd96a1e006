"""The hosts of `btswarm up --hosts` (pure): addresses, MACs, links, the ip/tc commands, the layout and
configs on them, the ready document, and `btswarm run --host`."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest

from btswarm import cli, hosts, run, shaping, topology, up
from btswarm.ready import Ready
from torrents.errors import BtswarmError

SITES = ["site1", "site2"]


def plan(site_link=("300mbit",), client_link="100mbit", t3_hosts=2, sites=SITES) -> hosts.HostPlan:
    return hosts.plan("bth-1-abc", sites, t3_hosts, shaping.LinkOptions.parse(list(site_link), client_link))


def test_each_part_on_a_host_with_its_address_namespace_and_uplink():
    p = plan(site_link=("300mbit", "site2=50mbit"))
    assert [(h.name, h.role, h.address, h.netns, h.link and h.link.rate) for h in p.hosts] == [
        ("services", "services", "127.20.0.1", "bth-1-abc-services", None),
        ("site1", "site", "127.20.1.1", "bth-1-abc-site1", 300_000_000),
        ("site2", "site", "127.20.1.2", "bth-1-abc-site2", 50_000_000),
        ("t3-1", "t3", "127.20.2.1", "bth-1-abc-t3-1", 100_000_000),
        ("t3-2", "t3", "127.20.2.2", "bth-1-abc-t3-2", 100_000_000)]
    assert p.lan == "bth-1-abc-lan" and p.namespaces[0] == p.lan and len(set(p.namespaces)) == 6
    assert [(link.label, link.address, link.rate) for link in p.links()] == [
        ("site1", "127.20.1.1", 300_000_000), ("site2", "127.20.1.2", 50_000_000),
        ("t3-1", "127.20.2.1", 100_000_000), ("t3-2", "127.20.2.2", 100_000_000)]


def test_without_links_no_host_is_shaped():
    p = plan(site_link=(), client_link=None, t3_hosts=1)
    assert [h.name for h in p.hosts] == ["services", "site1", "site2", "t3-1"] and p.links() == ()


def test_every_address_is_in_the_loopback_range_and_none_is_this_hosts():
    p = plan(sites=[f"site{i + 1}" for i in range(250)], t3_hosts=250)
    addresses = [ipaddress.ip_address(h.address) for h in p.hosts] + [ipaddress.ip_address(hosts.LAN_ADDRESS)]
    assert all(a.is_loopback and a in hosts.NETWORK and a != ipaddress.ip_address("127.0.0.1") for a in addresses)
    assert len(set(addresses)) == len(addresses) == 502


@pytest.mark.parametrize("address, mac", [("127.20.0.1", "02:00:7f:14:00:01"), ("127.20.1.2", "02:00:7f:14:01:02"),
                                          ("127.20.2.250", "02:00:7f:14:02:fa"), ("127.20.255.254", "02:00:7f:14:ff:fe")])
def test_macs_follow_from_the_addresses_locally_administered_unicast(address, mac):
    assert hosts.mac_of(address) == mac
    first = int(mac.split(":")[0], 16)
    assert first & 0b10 and not first & 0b01


@pytest.mark.parametrize("kwargs, message", [
    ({"site_link": ("site9=1mbit",)}, "--site-link: no site site9 (sites: site1, site2)"),
    ({"t3_hosts": 0}, "--t3-hosts: 0 is out of range (1-250)"),
])
def test_what_hosts_cannot_do_is_named(kwargs, message):
    with pytest.raises(BtswarmError) as e:
        plan(**kwargs)
    assert str(e.value).startswith(message)


def test_lan_steps_a_bridge_with_an_address_to_watch_from():
    p = plan()
    assert hosts.lan_steps(p) == [
        ("bth-1-abc-lan", ["ip", "link", "set", "dev", "lo", "up"]),
        ("bth-1-abc-lan", ["ip", "link", "add", "dev", "br0", "mtu", "1500", "type", "bridge"]),
        ("bth-1-abc-lan", ["ip", "link", "set", "dev", "br0", "address", "02:00:7f:14:ff:fe", "up"]),
        ("bth-1-abc-lan", ["ip", "addr", "add", "127.20.255.254/16", "dev", "br0", "scope", "global"])]


def test_host_steps_lo_this_host_only_a_veth_to_the_bridge_and_the_uplink_shaped():
    p = plan()
    site2 = p.host("site2")
    steps = hosts.host_steps(p, site2)
    ns = "bth-1-abc-site2"
    assert steps[:7] == [
        (ns, ["ip", "link", "set", "dev", "lo", "up"]),
        (ns, ["ip", "addr", "del", "127.0.0.1/8", "dev", "lo"]),
        (ns, ["ip", "addr", "add", "127.0.0.1/32", "dev", "lo"]),
        (ns, ["ip", "link", "add", "dev", "eth0", "mtu", "1500", "address", "02:00:7f:14:01:02", "type", "veth",
              "peer", "name", "v-site2", "mtu", "1500", "netns", "bth-1-abc-lan"]),
        ("bth-1-abc-lan", ["ip", "link", "set", "dev", "v-site2", "master", "br0", "up"]),
        (ns, ["ip", "addr", "add", "127.20.1.2/16", "dev", "eth0", "scope", "global"]),
        (ns, ["ip", "link", "set", "dev", "eth0", "up"])]
    # the uplink: the shaping plan's htb on eth0, one class for the host's address
    assert [cmd for _, cmd in steps[7:]] == shaping.tc_commands([shaping.Link("127.20.1.2", 300_000_000, "site2")],
                                                                "eth0")
    assert {n for n, _ in steps[7:]} == {ns} and hosts.class_id() == "1:10"
    unshaped = hosts.host_steps(p, p.host("services"))
    assert len(unshaped) == 7 and not any(cmd[0] == "tc" for _, cmd in unshaped)


def test_without_a_round_trip_time_no_host_has_a_delay_line():
    p = plan()
    assert p.delays() == {} and not any(hosts.delay_steps(p, h) for h in p.hosts)
    assert not any(cmd[:2] == ["ip", "tuntap"] or "clsact" in cmd for h in p.hosts for _, cmd in hosts.host_steps(p, h))


def test_round_trip_times_each_host_holds_what_it_sends_to_or_from_a_delayed_host():
    p = plan(site_link=("300mbit/40ms", "site2=50mbit"), client_link="100mbit/10ms")
    assert [(h.name, h.link and h.link.rtt) for h in p.hosts] == [
        ("services", None), ("site1", 0.04), ("site2", 0.0), ("t3-1", 0.01), ("t3-2", 0.01)]
    assert p.delays() == {"127.20.1.1": 0.04, "127.20.2.1": 0.01, "127.20.2.2": 0.01}
    for h in p.hosts:  # every host runs a delay line: each talks to a delayed one
        steps = hosts.delay_steps(p, h)
        assert {ns for ns, _ in steps} == {h.netns}
        assert [cmd for _, cmd in steps[:2]] == shaping.tun_commands("btswarm-delay", 1500)
        assert steps[2][1] == ["tc", "qdisc", "add", "dev", "eth0", "clsact"]
        bpf = steps[3][1]
        assert bpf[:10] == ["tc", "filter", "add", "dev", "eth0", "egress", "protocol", "ip", "prio", "1"]
        assert bpf[10:12] == ["bpf", "bytecode"] and bpf[13:] == ["action", "mirred", "egress", "redirect", "dev", "btswarm-delay"]
        held = {a for a in ("127.20.0.1", "127.20.1.1", "127.20.1.2", "127.20.2.1", "127.20.2.2", "127.20.255.254")
                if _bpf_matches(bpf[12], a, mark=0)}
        # a delayed host holds all it sends; the others what goes to a delayed host; marked: nothing
        assert held == ({"127.20.0.1", "127.20.1.1", "127.20.1.2", "127.20.2.1", "127.20.2.2", "127.20.255.254"}
                        if h.address in p.delays() else {"127.20.1.1", "127.20.2.1", "127.20.2.2"})
        assert not any(_bpf_matches(bpf[12], a, mark=hosts.DELAY_MARK) for a in held)
        assert hosts.host_steps(p, h)[-4:] == steps
    # each uplink's queue: one bandwidth-delay product of the longest round trip through it
    assert p.longest_rtt(p.host("site1")) == pytest.approx(0.05) and p.longest_rtt(p.host("site2")) == 0.04
    assert p.longest_rtt(p.host("t3-1")) == pytest.approx(0.05)
    limits = [cmd[cmd.index("limit") + 1] for _, cmd in hosts.host_steps(p, p.host("site1")) if "bfifo" in cmd]
    assert limits == [str(shaping.queue_bytes(300_000_000, 0.05))]


def _bpf_matches(bytecode: str, dst: str, mark: int) -> bool:
    """Run `tc ... bpf bytecode` text (the three opcodes unmarked_bpf uses) on an Ethernet frame to `dst`
    that carries `mark`: what cls_bpf decides."""
    frame = bytes(14) + bytes([0x45]) + bytes(15) + ipaddress.IPv4Address(dst).packed
    count, *prog = bytecode.split(",")
    prog = [tuple(int(x) for x in ins.split()) for ins in prog]
    assert len(prog) == int(count)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # ld [k]: the mark, or a word of the frame
            acc = mark if k == 0xFFFFF000 + 20 else int.from_bytes(frame[k:k + 4], "big")
        elif code == 0x15:  # jeq #k
            pc += jt if acc == k else jf
        elif code == 0x06:  # ret #k: 0 is no match
            return k != 0
        pc += 1


def test_bridge_side_names_fit_ifnamsiz():
    p = plan(sites=[f"site{i + 1}" for i in range(250)], t3_hosts=250)
    names = [h.peer_dev for h in p.hosts]
    assert max(len(n) for n in names) <= 15 and len(set(names)) == len(names)


def test_sysctls_route_and_arp_127_on_the_veth_and_no_ipv6_beyond_lo():
    assert hosts.sysctls() == [("net/ipv4/conf/all/route_localnet", "1"),
                               ("net/ipv4/conf/default/route_localnet", "1"),
                               ("net/ipv6/conf/default/disable_ipv6", "1")]


def layout(tmp_path: Path) -> topology.Layout:
    opts = up.UpOptions(state=tmp_path / "state", hosts=True)
    return up.layout(opts, tmp_path / "data", (), plan())


def test_every_service_on_its_hosts_address_and_usual_ports_as_a_real_site(tmp_path):
    fed = layout(tmp_path)
    conf = topology.configs(fed)
    assert conf["tracker"]["tracker"]["listen"] == "127.20.0.1:6969"
    assert conf["repo"]["repo"]["listen"] == "127.20.0.1:8080"
    server = conf["site2"]["server"]
    assert (server["listen"], server["peer_listen"], server["control_url"], server["web_listen"]) == (
        "127.20.1.2:8700", "127.20.1.2:6881", "http://127.20.1.2:8700", "127.20.1.2:8701")
    assert (server["tracker"], server["repo"]) == ("http://127.20.0.1:6969", "http://127.20.0.1:8080")
    assert conf["t3"]["server"]["peer_listen"] == "127.20.2.1:6882"
    services = {s.label: s.netns for s in topology.services(fed, Path("/venv/bin"))}
    assert services == {"tracker": "bth-1-abc-services", "repo": "bth-1-abc-services",
                        "site1": "bth-1-abc-site1", "site2": "bth-1-abc-site2"}


@pytest.mark.parametrize("kwargs, option", [({"base_port": 7000}, "--base-port"), ({"redis": True}, "--redis"),
                                            ({"rucio": True}, "--rucio"),
                                            ({"links": shaping.LinkOptions.parse(["10mbit"], mtu=9000)}, "--link-mtu")])
def test_options_hosts_do_not_take_are_refused(tmp_path, kwargs, option):
    with pytest.raises(BtswarmError) as e:
        up.UpOptions(state=tmp_path, hosts=True, **kwargs).host_plan("x")
    assert str(e.value).startswith(f"{option}: not with --hosts")


def test_the_ready_document_names_every_host(tmp_path):
    p = plan()
    doc = topology.ready_document(layout(tmp_path), ["ds"], netns=p.lan, links=p.links(), hosts=p.hosts)
    back = Ready.from_json(doc.to_json())
    assert back == doc and back.host("t3-2") == p.host("t3-2")
    written = json.loads(doc.to_json())["hosts"]
    assert written[0] == {"name": "services", "role": "services", "address": "127.20.0.1",
                          "netns": "bth-1-abc-services", "mac": "02:00:7f:14:00:01"}
    assert written[1]["rate"] == 300_000_000 and written[1]["rtt"] == 0.0
    assert "hosts" not in json.loads(topology.ready_document(layout(tmp_path), ["ds"]).to_json())


def test_btswarm_run_on_hosts_takes_t3_hosts_in_turn_with_the_repository_and_no_listen_address(tmp_path):
    p = plan()
    ready = topology.ready_document(layout(tmp_path), ["ds"], netns=p.lan, links=p.links(), hosts=p.hosts)
    assert [run.pick_host(ready, None, k).name for k in range(3)] == ["t3-1", "t3-2", "t3-1"]
    assert run.pick_host(ready, "services", 5) == p.host("services")
    with pytest.raises(BtswarmError, match=r"--host: no host 't3-9' \(hosts: services, site1, site2, t3-1, t3-2\)"):
        run.pick_host(ready, "t3-9", 0)
    env = run.host_env(ready, p.host("t3-2"), {"PATH": "/bin"})
    assert env["BTSWARM_GET_REPO"] == "http://127.20.0.1:8080" and "BTSWARM_GET_LISTEN" not in env
    assert env["BTSWARM_CLIENT_ADDRESS"] == "127.20.2.2"


def test_hosts_without_root_is_one_clear_line(tmp_path, monkeypatch, capsys):
    from btswarm import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert cli.main(["up", "--hosts", "--state", str(tmp_path / "state")]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "btswarm: error: --hosts: needs root (network namespaces, a bridge, veths and tc shaping); run as root"]


def test_run_host_on_a_federation_without_hosts_is_refused(tmp_path):
    fed = topology.Layout(state=tmp_path, data=tmp_path, tracker_port=1, repo_port=2, sites=())
    topology.ready_document(fed, ["ds"]).write(tmp_path / topology.READY_COPY)
    with pytest.raises(BtswarmError, match="--host: this federation has no hosts"):
        run.exec_client(tmp_path, ["true"], host="t3-1")


"""The shaping plan (pure): rates, per-site overrides, the address → class plan, the tc commands."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from btswarm import run, shaping, topology
from torrents.errors import BtswarmError

SITES = [("site1", "127.0.0.2"), ("site2", "127.0.0.3"), ("site3", "127.0.0.4")]
CLIENTS = [topology.client_ip(k) for k in range(3)]


@pytest.mark.parametrize("text, bps", [("100mbit", 100_000_000), ("1gbit", 10**9), ("500kbit", 500_000),
                                       ("2.5mbit", 2_500_000), (" 10MBit ", 10_000_000), ("64000bit", 64_000)])
def test_rates_parse_in_tc_units(text, bps):
    assert shaping.parse_rate(text) == bps


@pytest.mark.parametrize("text, problem", [
    ("100", "is not a rate"), ("100mb", "is not a rate"), ("fast", "is not a rate"), ("-1mbit", "is not a rate"),
    ("1kbit", "out of range"), ("200gbit", "out of range")])
def test_bad_rates_are_named(text, problem):
    with pytest.raises(BtswarmError) as e:
        shaping.parse_rate(text, "--site-link")
    assert str(e.value).startswith(f"--site-link: {text!r} ") and problem in str(e.value)


def test_format_rate_reads_back():
    for bps in (100_000_000, 10**9, 2_500_000, 64_000, 1_234_567):
        assert shaping.parse_rate(shaping.format_rate(bps)) == pytest.approx(bps, rel=1e-3)


def test_site_links_default_and_overrides():
    opts = shaping.LinkOptions.parse(["100mbit", "site3=10mbit"], "50mbit", client_addresses=3)
    links = shaping.plan(opts, SITES, CLIENTS, topology.BASELINE_IP)
    assert [(link.label, link.address, link.rate) for link in links] == [
        ("site1", "127.0.0.2", 100_000_000), ("site2", "127.0.0.3", 100_000_000), ("site3", "127.0.0.4", 10_000_000),
        ("client 127.0.0.101", "127.0.0.101", 50_000_000), ("client 127.0.0.102", "127.0.0.102", 50_000_000),
        ("client 127.0.0.103", "127.0.0.103", 50_000_000), ("baseline", "127.0.0.60", 100_000_000)]


def test_only_overridden_sites_are_shaped_without_a_default():
    opts = shaping.LinkOptions.parse(["site2=10mbit"])
    links = shaping.plan(opts, SITES, CLIENTS, topology.BASELINE_IP)
    assert [(link.label, link.rate) for link in links] == [("site2", 10_000_000)]  # no baseline: no default rate
    assert opts.shaped and not shaping.LinkOptions().shaped


@pytest.mark.parametrize("values, message", [
    (["100mbit", "1gbit"], "--site-link: two default rates (100mbit and 1gbit)"),
    (["site1=1mbit", "site1=2mbit"], "--site-link: site1 is given twice"),
    (["=1mbit"], "--site-link: '=1mbit': no name before '='"),
    (["site1=quick"], "--site-link site1: 'quick' is not a rate"),
])
def test_bad_site_links(values, message):
    with pytest.raises(BtswarmError) as e:
        shaping.LinkOptions.parse(values)
    assert str(e.value).startswith(message)


def test_an_override_must_name_a_site():
    with pytest.raises(BtswarmError, match=r"^--site-link: no site site9 \(sites: site1, site2, site3\)"):
        shaping.plan(shaping.LinkOptions.parse(["site9=1mbit"]), SITES, CLIENTS, None)


def test_colliding_addresses_are_refused():
    sites = [(topology.site_name(i), topology.site_ip(i)) for i in range(60)]  # site59 is on 127.0.0.60, the baseline's
    with pytest.raises(BtswarmError, match=r"^127\.0\.0\.60: shaped twice \(site59 and baseline\)"):
        shaping.plan(shaping.LinkOptions.parse(["1gbit"]), sites, [], topology.BASELINE_IP)


def test_only_loopback_addresses():
    with pytest.raises(BtswarmError, match=r"^10\.0\.0\.2: not a loopback address"):
        shaping.plan(shaping.LinkOptions.parse(["1gbit"]), [("site1", "10.0.0.2")], [], None)


def test_link_mtu_sets_the_namespace_loopback_only_when_asked_and_only_when_shaped():
    assert shaping.mtu_commands(shaping.LinkOptions.parse(["8mbit"]).mtu) == []  # lo's own 64 KiB
    opts = shaping.LinkOptions.parse(["8mbit"], mtu=9000)
    assert [" ".join(c) for c in shaping.mtu_commands(opts.mtu)] == ["ip link set dev lo mtu 9000"]
    with pytest.raises(BtswarmError, match=r"^--link-mtu: applies to shaped links only"):
        shaping.LinkOptions.parse([], mtu=9000)
    for bad in (1279, 65537):
        with pytest.raises(BtswarmError, match=rf"^--link-mtu: {bad} is out of range \(1280-65536 bytes\)"):
            shaping.LinkOptions.parse(["8mbit"], mtu=bad)


def test_tc_commands_one_class_queue_and_source_filter_per_link():
    links = shaping.plan(shaping.LinkOptions.parse(["100mbit", "site2=10mbit"], "1gbit", 1),
                         SITES[:2], CLIENTS[:1], None)
    cmds = [" ".join(c) for c in shaping.tc_commands(links)]
    assert cmds[0] == "tc qdisc add dev lo root handle 1: htb"  # no default class: unmatched traffic is unshaped
    assert cmds[1:4] == [
        "tc class add dev lo parent 1: classid 1:10 htb rate 100000000bit ceil 100000000bit quantum 65536",
        "tc qdisc add dev lo parent 1:10 handle 10: bfifo limit 262144",
        "tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip src 127.0.0.2/32 flowid 1:10"]
    assert cmds[4].endswith("classid 1:11 htb rate 10000000bit ceil 10000000bit quantum 65536")
    assert cmds[7] == "tc class add dev lo parent 1: classid 1:12 htb rate 1000000000bit ceil 1000000000bit quantum 65536"
    assert cmds[8] == "tc qdisc add dev lo parent 1:12 handle 12: bfifo limit 2500000"  # 20 ms at 1 Gbit/s
    assert cmds[9].endswith("match ip src 127.0.0.101/32 flowid 1:12")
    assert len(cmds) == 1 + 3 * len(links)
    assert shaping.link_class_ids(links) == {"127.0.0.2": "1:10", "127.0.0.3": "1:11", "127.0.0.101": "1:12"}


def test_class_bytes_from_tc_statistics():
    text = """class htb 1:10 root leaf 10: prio 0 rate 100Mbit ceil 100Mbit burst 1600b cburst 1600b
 Sent 100102755 bytes 1553 pkt (dropped 27, overlimits 1550 requeues 0)
 backlog 0b 0p requeues 0
class htb 1:1a root leaf 1a: prio 0 rate 10Mbit ceil 10Mbit burst 1600b cburst 1600b
 Sent 42 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)
"""
    assert shaping.class_bytes(text) == {"1:10": 100102755, "1:1a": 42}


def test_btswarm_run_hands_out_the_shaped_client_addresses_in_turn():
    layout = topology.Layout(state=Path("/s"), data=Path("/d"), tracker_port=7000, repo_port=8080, sites=())
    ready = topology.ready_document(layout, ["ds"], netns="btswarm-x", links=(
        shaping.Link("127.0.0.2", 10**7, "site1"), shaping.Link("127.0.0.101", 10**7, "client 127.0.0.101"),
        shaping.Link("127.0.0.102", 10**7, "client 127.0.0.102")))
    addresses = run.client_addresses(ready)
    assert [run.next_address(addresses, i) for i in range(3)] == ["127.0.0.101", "127.0.0.102", "127.0.0.101"]
    unshaped = dataclasses.replace(ready, links=(), netns=None)
    assert run.client_addresses(unshaped)[:2] == ["127.0.0.101", "127.0.0.102"]
    env = run.client_env(ready, "127.0.0.102", {"BTSWARM_GET_REPO": "http://elsewhere:1"})
    assert env["BTSWARM_GET_REPO"] == "http://elsewhere:1" and env["BTSWARM_GET_LISTEN"] == "127.0.0.102"


def test_shaping_without_root_is_one_clear_line(tmp_path, monkeypatch, capsys):
    """Not root: `btswarm up --site-link` says so in one line and starts nothing (euid faked: we run as root)."""
    from btswarm import cli, netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    code = cli.main(["up", "--state", str(tmp_path / "state"), "--site-link", "10mbit"])
    assert code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "btswarm: error: --site-link: needs root (a private network namespace and tc shaping); "
        "run as root, or without --site-link/--client-link"]
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("text, spec", [
    ("100mbit", shaping.LinkSpec(100_000_000)), ("100mbit/40ms", shaping.LinkSpec(100_000_000, 0.040)),
    ("1gbit/0.1s", shaping.LinkSpec(10**9, 0.1)), ("10mbit/500us", shaping.LinkSpec(10**7, 0.0005)),
    ("10mbit/0ms", shaping.LinkSpec(10**7, 0.0))])
def test_links_parse_with_an_optional_round_trip(text, spec):
    assert shaping.parse_link(text) == spec
    assert shaping.parse_link(str(spec)) == spec


@pytest.mark.parametrize("text, message", [
    ("100mbit/", "--client-link: '' is not a delay (examples: 40ms, 0.1s)"),
    ("100mbit/40", "--client-link: '40' is not a delay"), ("100mbit/-4ms", "--client-link: '-4ms' is not a delay"),
    ("100mbit/11s", "--client-link: '11s' is out of range (0 to 10s)"),
    ("fast/40ms", "--client-link: 'fast' is not a rate")])
def test_bad_delays_are_named(text, message):
    with pytest.raises(BtswarmError) as e:
        shaping.LinkOptions.parse([], text)
    assert str(e.value).startswith(message)


def test_delays_per_site_and_for_the_clients_reach_the_links():
    opts = shaping.LinkOptions.parse(["100mbit/40ms", "site3=10mbit/100ms"], "50mbit/10ms", client_addresses=1)
    links = shaping.plan(opts, SITES, CLIENTS[:1], topology.BASELINE_IP)
    assert [(link.label, link.rate, link.rtt) for link in links] == [
        ("site1", 10**8, 0.040), ("site2", 10**8, 0.040), ("site3", 10**7, 0.100),
        ("client 127.0.0.101", 5 * 10**7, 0.010), ("baseline", 10**8, 0.040)]
    assert shaping.delays(links)["127.0.0.4"] == 0.100


def test_without_a_delay_there_is_no_delay_line():
    links = shaping.plan(shaping.LinkOptions.parse(["100mbit"], "100mbit", 2), SITES, CLIENTS, None)
    assert not shaping.delayed(links) and shaping.delay_commands(links) == [] and shaping.delays(links) == {}
    assert "rtt" not in links[0].as_dict()  # the ready document as before


def test_delay_commands_a_tun_shaped_like_lo_and_lo_redirecting_the_delayed_addresses():
    links = shaping.plan(shaping.LinkOptions.parse(["100mbit/40ms"], "1gbit", 1), SITES[:1], CLIENTS[:1], None)
    cmds = [" ".join(c) for c in shaping.delay_commands(links)]
    assert cmds[:2] == ["ip tuntap add dev btswarm-delay mode tun",
                        "ip link set dev btswarm-delay mtu 65535 txqueuelen 1000 up"]
    # The same classes as lo's, on the TUN device: a redirected packet is shaped there.
    assert cmds[2:2 + 7] == [" ".join(c) for c in shaping.tc_commands(links, "btswarm-delay")]
    assert cmds[4] == "tc qdisc add dev btswarm-delay parent 1:10 handle 10: bfifo limit 500000"  # 40 ms at R
    assert cmds[9:] == [
        "tc qdisc add dev lo clsact",
        "tc filter add dev lo egress protocol ip prio 1 u32 match ip src 127.0.0.2/32 "
        "action mirred egress redirect dev btswarm-delay",
        "tc filter add dev lo egress protocol ip prio 1 u32 match ip dst 127.0.0.2/32 "
        "action mirred egress redirect dev btswarm-delay"]  # the client has no delay: no filter of its own
    assert ("net/ipv4/conf/lo/route_localnet", "1") in shaping.delay_sysctls()


def test_the_ready_document_keeps_each_links_round_trip(tmp_path):
    from btswarm.ready import Ready

    layout = topology.Layout(state=Path("/s"), data=Path("/d"), tracker_port=7000, repo_port=8080, sites=())
    links = (shaping.Link("127.0.0.2", 10**8, "site1", 0.04), shaping.Link("127.0.0.101", 10**8, "client 127.0.0.101"))
    topology.ready_document(layout, ["ds"], netns="btswarm-x", links=links).write(tmp_path / "ready.json")
    assert Ready.read(tmp_path / "ready.json").links == links

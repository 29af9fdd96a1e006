"""torrents.servicekit.ltsession.Alerts: alerts to handlers by type, with what nobody handles counted."""

from __future__ import annotations

import libtorrent as lt
import pytest

from torrents.servicekit import ltsession


class Base:
    pass


class Peer(Base):
    pass


class Connect(Peer):
    pass


def test_each_alert_goes_to_the_handler_of_its_type_or_of_the_nearest_base():
    seen = []
    alerts = ltsession.Alerts({Peer: lambda a: seen.append(("peer", a)), Base: lambda a: seen.append(("base", a))})
    one, two, three = Connect(), Peer(), Base()
    for a in (one, two, three):
        alerts(a)
    assert seen == [("peer", one), ("peer", two), ("base", three)]
    assert alerts.unhandled == {}


def test_an_alert_nobody_handles_is_counted_by_name():
    alerts = ltsession.Alerts({Connect: lambda a: None})
    alerts(Peer())
    alerts(Peer())
    alerts(Base())
    alerts(Connect())
    assert alerts.unhandled == {"Peer": 2, "Base": 1}


def test_a_handler_that_fails_names_the_alert_it_was_handling():
    def broken(a):
        return a.operation  # libtorrent 2.1's file_error_alert has no such attribute

    alerts = ltsession.Alerts({Peer: broken})
    with pytest.raises(AttributeError) as caught:
        alerts(Connect())
    assert caught.value.__notes__ == ["while handling a libtorrent Connect"]


def test_drain_handles_what_a_real_session_posts():
    ses = ltsession.session("127.0.0.1", 0)
    kinds = []
    alerts = ltsession.Alerts({lt.alert: lambda a: kinds.append(type(a).__name__)})
    deadline = 50
    while "listen_succeeded_alert" not in kinds and deadline:
        ses.wait_for_alert(100)
        alerts.drain(ses)
        deadline -= 1
    assert "listen_succeeded_alert" in kinds

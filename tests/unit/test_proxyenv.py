"""Which proxy a URL goes through (torrents/proxyenv.py): the variables' rules, as curl reads them."""

from __future__ import annotations

import pytest

from torrents.errors import ConfigError
from torrents.proxyenv import NONE, Proxy, from_environ

SQUID = Proxy("squid.example", 3128)


def via(environ: dict[str, str], url: str) -> str | None:
    proxy = from_environ(environ).for_url(url)
    return proxy.url if proxy else None


def test_no_variable_means_no_proxy():
    assert from_environ({}) is NONE
    assert not from_environ({"no_proxy": "example.org"})
    assert NONE.for_url("http://repo.example:8080/api") is None


def test_http_and_https_urls_take_their_own_variable():
    env = {"http_proxy": "http://squid.example:3128", "https_proxy": "http://other.example:8080"}
    assert via(env, "http://repo.example:8080/api/datasets") == "http://squid.example:3128"
    assert via(env, "https://repo.example/api") == "http://other.example:8080"
    assert via({"http_proxy": "squid.example:3128"}, "https://repo.example/") is None


def test_lower_case_wins_and_upper_case_is_read():
    assert via({"HTTP_PROXY": "a.example:1", "http_proxy": "b.example:2"}, "http://x/") == "http://b.example:2"
    assert via({"HTTPS_PROXY": "a.example:1"}, "https://x/") == "http://a.example:1"
    assert via({"HTTP_PROXY": "a.example:1"}, "http://x/") == "http://a.example:1"


def test_upper_case_http_proxy_is_ignored_in_a_cgi_program():
    assert via({"HTTP_PROXY": "evil.example:1", "REQUEST_METHOD": "GET"}, "http://x/") is None


def test_a_proxy_without_scheme_or_port_is_http_on_1080_with_credentials_kept():
    proxies = from_environ({"http_proxy": "squid.example", "https_proxy": "http://u%40cern:p%3Aw@[fd00::5]:3128/"})
    assert proxies.http == Proxy("squid.example", 1080)
    assert proxies.https == Proxy("fd00::5", 3128, "u@cern", "p:w")
    assert proxies.https.url == "http://[fd00::5]:3128"
    # The credentials as a proxy is sent them (RFC 7617), by aiohttp's requests and by the web-seed relay
    assert proxies.https.authorization == "Basic dUBjZXJuOnA6dw==" and proxies.http.authorization == ""


@pytest.mark.parametrize("value, problem", [
    ("socks5://s.example:1080", "socks5:// proxies are not supported, only http://"),
    ("https://s.example:3129", "https:// proxies are not supported"),
    ("http://s.example:99999", "has a bad port"),
    ("http://:3128", "names no host"),
])
def test_a_bad_proxy_names_its_variable(value, problem):
    with pytest.raises(ConfigError) as exc:
        from_environ({"https_proxy": value})
    assert exc.value.subject == "https_proxy"
    assert problem in exc.value.problem


@pytest.mark.parametrize("no_proxy, url, direct", [
    ("example.org", "http://example.org/", True),
    ("example.org", "http://repo.example.org:8080/", True),
    (".example.org", "http://repo.example.org/", True),
    ("*.example.org", "http://repo.example.org/", True),
    ("example.org", "http://badexample.org/", False),
    ("EXAMPLE.org", "http://Repo.Example.ORG./", True),
    ("10.0.0.0/8", "http://10.1.2.3:8080/", True),
    ("10.0.0.0/8", "http://11.1.2.3:8080/", False),
    ("10.1.2.3", "http://10.1.2.3/", True),
    ("fd00::/8", "http://[fd00::1]:6969/announce", True),
    ("[fd00::1]:6969", "http://[fd00::1]:6969/announce", True),
    ("[fd00::1]:6969", "http://[fd00::1]:8080/", False),
    ("repo.example:8080", "http://repo.example:8080/", True),
    ("repo.example:8080", "http://repo.example:6969/", False),
    ("127.20.0.0/16", "http://127.20.0.1:8080/", True),
    ("a.example, b.example  c.example", "http://c.example/", True),
    ("*", "http://anything.example/", True),
    ("", "http://10.1.2.3/", False),
    ("10.0.0.0/8", "http://ten.example/", False),  # a name is never resolved to match an address
])
def test_no_proxy(no_proxy, url, direct):
    env = {"http_proxy": "squid.example:3128", "no_proxy": no_proxy}
    assert (via(env, url) is None) is direct


def test_this_host_is_never_proxied_but_the_rest_of_127_is():
    env = {"http_proxy": "squid.example:3128"}
    for url in ("http://127.0.0.1:8765/x", "http://localhost:8080/", "http://[::1]:80/"):
        assert via(env, url) is None, url
    assert via(env, "http://127.20.0.1:8080/api") == "http://squid.example:3128"


def test_no_proxy_upper_case_is_read_and_bad_entries_are_named():
    assert via({"http_proxy": "s:1", "NO_PROXY": "repo.example"}, "http://repo.example/") is None
    with pytest.raises(ConfigError) as exc:
        from_environ({"http_proxy": "s:1", "no_proxy": "10.0.0.0/33"})
    assert (exc.value.subject, exc.value.problem) == ("no_proxy", "'10.0.0.0/33' is not a CIDR block")
    with pytest.raises(ConfigError) as exc:
        from_environ({"http_proxy": "s:1", "no_proxy": "repo.example:http"})
    assert exc.value.problem == "'repo.example:http' has a bad port"

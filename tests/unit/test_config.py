"""torrents.config: defaults, lookup order, environment and flags, and clear errors.

The loader is shared; each part declares its own section. `load_config`
below loads every part's section as that part would, so one test sees them all.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

from btget.config import GetConfig
from btrepo.config import RepoConfig
from btserver.config import ServerConfig
from torrents.config import find_config, load_section
from torrents.errors import ConfigError
from torrents.hostport import format_hostport, parse_hostport
from tracker.config import TrackerConfig

KNOWN_GET = ", ".join(sorted(f.name for f in dataclasses.fields(GetConfig)))
SECTIONS = {"get": GetConfig, "server": ServerConfig, "tracker": TrackerConfig, "repo": RepoConfig}


@dataclasses.dataclass(frozen=True)
class Config:
    get: GetConfig = dataclasses.field(default_factory=GetConfig)
    server: ServerConfig = dataclasses.field(default_factory=ServerConfig)
    tracker: TrackerConfig = dataclasses.field(default_factory=TrackerConfig)
    repo: RepoConfig = dataclasses.field(default_factory=RepoConfig)
    path: str | None = None


def load_config(explicit=None, *, overrides=None, environ=None) -> Config:
    sections = {name: load_section(name, cls, explicit, overrides=(overrides or {}).get(name), environ=environ)
                for name, cls in SECTIONS.items()}
    path = find_config(explicit)
    return Config(**sections, path=str(path) if path else None)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh HOME with no config, and no BTSWARM_* or XDG_STATE_HOME from the caller's environment."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key in list(os.environ):
        if key.startswith("BTSWARM_") or key == "XDG_STATE_HOME":
            monkeypatch.delenv(key)
    return home


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error(*args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(*args, **kwargs)
    return str(info.value)


def test_defaults_with_no_file(home):
    cfg = load_config()
    assert cfg.path is None
    assert cfg == Config(path=None)
    assert cfg.get.workers == 1 and cfg.get.repo == "http://127.0.0.1:8080"
    assert cfg.server.site == "site1" and cfg.server.listen == "127.0.0.1:8700" and cfg.server.private is True
    assert cfg.tracker.listen == "127.0.0.1:6969" and cfg.tracker.site_secrets == {"site1": "btswarm-dev-secret"}
    assert cfg.repo.state == str(home / ".local" / "state" / "btswarm" / "repo")
    assert cfg.server.state == str(home / ".local" / "state" / "btswarm" / "server")


def test_state_follows_xdg_state_home(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert load_config().repo.state == str(tmp_path / "xdg" / "btswarm" / "repo")


def test_lookup_order(home, tmp_path, monkeypatch):
    user = write(home / ".config" / "btswarm" / "config.toml", "[get]\nworkers = 2\n")
    assert load_config().get.workers == 2
    assert load_config().path == str(user)
    env_file = write(tmp_path / "env.toml", "[get]\nworkers = 3\n")
    monkeypatch.setenv("BTSWARM_CONFIG", str(env_file))
    assert load_config().get.workers == 3
    explicit = write(tmp_path / "explicit.toml", "[get]\nworkers = 5\n")
    cfg = load_config(explicit)
    assert (cfg.get.workers, cfg.path) == (5, str(explicit))


def test_missing_named_files_are_errors(home, tmp_path, monkeypatch):
    assert error(tmp_path / "nope.toml") == f"{tmp_path}/nope.toml: config file not found"
    monkeypatch.setenv("BTSWARM_CONFIG", str(tmp_path / "gone.toml"))
    assert error() == f"{tmp_path}/gone.toml: config file named by $BTSWARM_CONFIG not found"


def test_environment_overrides_the_file(home, tmp_path, monkeypatch):
    path = write(tmp_path / "c.toml", "[get]\nworkers = 2\nrepo = 'http://repo.example'\n")
    monkeypatch.setenv("BTSWARM_GET_WORKERS", "4")
    cfg = load_config(path)
    assert cfg.get.workers == 4
    assert cfg.get.repo == "http://repo.example"


def test_explicit_environ_mapping_replaces_os_environ(home, monkeypatch):
    monkeypatch.setenv("BTSWARM_GET_WORKERS", "4")
    assert load_config(environ={}).get.workers == 1
    assert load_config(environ={"BTSWARM_GET_WORKERS": "6"}).get.workers == 6


def test_overrides_beat_environment(home, tmp_path, monkeypatch):
    path = write(tmp_path / "c.toml", "[get]\nworkers = 2\n")
    monkeypatch.setenv("BTSWARM_GET_WORKERS", "4")
    assert load_config(path, overrides={"get": {"workers": 8}}).get.workers == 8
    # an option the user did not give (None) leaves the environment's value
    assert load_config(path, overrides={"get": {"workers": None}}).get.workers == 4


def test_environment_types(home):
    env = {"BTSWARM_TRACKER_OPEN": "yes", "BTSWARM_SERVER_ROOTS": "/data/a:/data/b",
           "BTSWARM_TRACKER_SITE_SECRETS": "site1=s1,site2=s2", "BTSWARM_GET_SEED_TIME": "1.5",
           "BTSWARM_TRACKER_SITE_NETWORKS": "site1=10.0.0.0/8"}
    cfg = load_config(environ=env)
    assert cfg.tracker.open is True
    assert cfg.server.roots == ("/data/a", "/data/b")
    assert cfg.tracker.site_secrets == {"site1": "s1", "site2": "s2"}
    assert cfg.tracker.site_networks == {"site1": ("10.0.0.0/8",)}
    assert cfg.get.seed_time == 1.5


def test_a_full_file(home, tmp_path):
    path = write(tmp_path / "c.toml", """
[server]
site = "uchicago"
roots = ["/pnfs/uchicago.edu/atlasdatadisk"]
manifests = "/etc/btswarm/site.tsv"
heartbeat_interval = 5
private = false

[tracker]
open = true
interval = 120

[tracker.site_secrets]
uchicago = "s3cret"

[tracker.site_networks]
uchicago = ["10.1.0.0/16", "192.170.0.0/16"]

[repo]
public_url = "https://repo.example"
""")
    cfg = load_config(path)
    assert cfg.server.site == "uchicago"
    assert cfg.server.roots == ("/pnfs/uchicago.edu/atlasdatadisk",)
    assert cfg.server.manifests == ("/etc/btswarm/site.tsv",)
    assert cfg.server.heartbeat_interval == 5.0 and isinstance(cfg.server.heartbeat_interval, float)
    assert cfg.server.private is False
    assert cfg.tracker.open is True and cfg.tracker.interval == 120
    assert cfg.tracker.site_secrets == {"uchicago": "s3cret"}
    assert cfg.tracker.site_networks == {"uchicago": ("10.1.0.0/16", "192.170.0.0/16")}
    assert cfg.repo.public_url == "https://repo.example"


def test_config_is_frozen(home):
    cfg = load_config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.get.workers = 3  # type: ignore[misc]


# errors name the file and the key

def test_unknown_section(home, tmp_path):
    path = write(tmp_path / "c.toml", "[gett]\nworkers = 2\n")
    assert error(path) == f"{path}: [gett]: unknown section (known: get, server, tracker, repo, access)"


def test_unknown_key(home, tmp_path):
    path = write(tmp_path / "c.toml", "[get]\nwrokers = 2\n")
    assert error(path) == f"{path}: [get] wrokers: unknown key (known: {KNOWN_GET})"


def test_section_must_be_a_table(home, tmp_path):
    path = write(tmp_path / "c.toml", "get = 3\n")
    assert error(path) == f"{path}: get: must be a table"


@pytest.mark.parametrize("toml, expected", [
    ("[get]\nworkers = 'four'", "[get] workers: expected a whole number of at least 1, or 'auto', got 'four'"),
    ("[get]\nworkers = 2.5", "[get] workers: expected a whole number of at least 1, or 'auto', got 2.5"),
    ("[get]\nworkers = true", "[get] workers: expected a whole number of at least 1, or 'auto', got True"),
    ("[get]\nworkers = 0", "[get] workers: expected a whole number of at least 1, or 'auto', got 0"),
    ("[get]\nseed_time = 'soon'", "[get] seed_time: not a duration (examples: 30, 30s, 10m, 2h), got 'soon'"),
    ("[get]\nseed_time = false", "[get] seed_time: expected a duration, got False"),
    ("[get]\ntimeout = -3", "[get] timeout: duration is negative, got -3"),
    ("[get]\nmax_connections = 0", "[get] max_connections: must be at least 1, got 0"),
    ("[server]\nupload_rate_limit = 'fast'",
     "[server] upload_rate_limit: not a rate (examples: 50MB/s, 400mbit, 2G, 0 for no limit), got 'fast'"),
    ("[get]\nmax_rate = '12 parsecs'",
     "[get] max_rate: not a rate (examples: 50MB/s, 400mbit, 2G, 0 for no limit), got '12 parsecs'"),
    ("[server]\nmax_seeds = 0", "[server] max_seeds: must be at least 1, got 0"),
    ("[tracker]\ninterval = 0", "[tracker] interval: must be at least 1, got 0"),
    ("[get]\nrepo = 8080", "[get] repo: expected a string, got 8080"),
    ("[server]\nprivate = 'maybe'", "[server] private: expected true or false, got 'maybe'"),
    ("[server]\nroots = [1, 2]", "[server] roots: expected a list of strings, got [1, 2]"),
    ("[tracker]\nsite_secrets = 'x'", "[tracker] site_secrets: expected a table, got 'x'"),
    ("[tracker.site_secrets]\nsite1 = 5", "[tracker] site_secrets.site1: expected a string, got 5"),
])
def test_wrong_types(home, tmp_path, toml, expected):
    path = write(tmp_path / "c.toml", toml + "\n")
    assert error(path) == f"{path}: {expected}"


def test_durations_and_sizes_read_the_same_in_files_environment_and_flags(home, tmp_path):
    path = write(tmp_path / "c.toml", "[get]\nstall_timeout = '5m'\nworkers = 'auto'\n"
                                      "[server]\nupload_rate_limit = '16MiB'\nidle_ttl = '1h'\n")
    cfg = load_config(path, environ={"BTSWARM_GET_TIMEOUT": "90s", "BTSWARM_GET_WORKERS": "3"})
    assert cfg.get.stall_timeout == 300.0 and cfg.get.timeout == 90.0
    assert cfg.get.workers == 3
    assert load_config(path, environ={}).get.workers == "auto"
    assert cfg.server.upload_rate_limit == 16 * 2**20 and cfg.server.idle_ttl == 3600.0
    assert load_config(path, overrides={"get": {"stall_timeout": 12.5}}).get.stall_timeout == 12.5


def test_bad_environment_value_names_the_variable(home, tmp_path):
    path = write(tmp_path / "c.toml", "[get]\nworkers = 2\n")
    assert error(path, environ={"BTSWARM_GET_WORKERS": "four"}) == \
        "$BTSWARM_GET_WORKERS: expected a whole number of at least 1, or 'auto', got 'four'"
    assert error(environ={"BTSWARM_SERVER_PRIVATE": "perhaps"}) == \
        "$BTSWARM_SERVER_PRIVATE: expected true or false, got 'perhaps'"


def test_bad_override(home):
    assert error(overrides={"get": {"workers": "x"}}) == \
        "--workers: expected a whole number of at least 1, or 'auto', got 'x'"
    assert error(overrides={"get": {"nope": 1}}) == "--nope: not a key of [get]"  # a bug in a command


def test_a_bad_file_value_is_named_even_when_a_flag_overrides_it(home, tmp_path):
    path = write(tmp_path / "c.toml", "[get]\ntimeout = -3\n")
    assert error(path, overrides={"get": {"timeout": 20.0}}) == f"{path}: [get] timeout: duration is negative, got -3"
    assert error(path, environ={"BTSWARM_GET_TIMEOUT": "20"}) == f"{path}: [get] timeout: duration is negative, got -3"


def test_invalid_toml(home, tmp_path):
    path = write(tmp_path / "c.toml", "[get\nworkers = 2\n")
    assert error(path).startswith(f"{path}: not valid TOML (")


def test_file_that_is_not_utf8(home, tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b"[get]\nrepo = '\xff'\n")
    assert error(path) == f"{path}: not UTF-8 (byte 14)"


def test_directory_instead_of_a_file(home, tmp_path):
    (tmp_path / "dir.toml").mkdir()
    assert error(tmp_path / "dir.toml") == f"{tmp_path}/dir.toml: config file not found"


# addresses

def test_format_hostport():
    assert format_hostport("127.0.0.2", 6881) == "127.0.0.2:6881"
    assert format_hostport("::1", 80) == "[::1]:80"
    assert parse_hostport(format_hostport("::1", 80)) == ("::1", 80)


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("localhost:0", ("localhost", 0)),
    ("[::1]:6881", ("::1", 6881)),
    ("site1.example.org:65535", ("site1.example.org", 65535)),
])
def test_parse_hostport(text, expected):
    assert parse_hostport(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("8080", "listen: '8080' is not HOST:PORT"),
    (":8080", "listen: ':8080' is not HOST:PORT"),
    ("[]:80", "listen: '[]:80' is not HOST:PORT"),
    ("::1", "listen: '::1' is not HOST:PORT (write an IPv6 address as [::1]:PORT)"),
    ("host:http", "listen: 'host:http' has a bad port"),
    ("host:", "listen: 'host:' has a bad port"),
    ("host:+80", "listen: 'host:+80' has a bad port"),
    ("host:65536", "listen: 'host:65536': port out of range"),
])
def test_parse_hostport_errors(text, expected):
    with pytest.raises(ConfigError) as info:
        parse_hostport(text, "listen")
    assert str(info.value) == expected


def test_the_rucio_sub_table_of_server(home, tmp_path):
    path = write(tmp_path / "c.toml", """
[server]
site = "UC_T2"
[server.rucio]
server = "https://rucio.example:443"
account = "uc_t2_btswarm"
username = "btswarm"
password_file = "/etc/btswarm/rucio-password"
rse = "UC_T2_DATADISK"
datasets = ["data18_13TeV:data18_13TeV.00348895.*", "user.jdoe:user.jdoe.test"]
pfn_map = {"root://door.uc:1094//pnfs/uc/" = "/pnfs/uc/"}
refresh = "10m"
""")
    rucio = load_config(path).server.rucio
    assert (rucio.rse, rucio.refresh, rucio.schemes) == ("UC_T2_DATADISK", 600.0, ("file", "root"))
    assert rucio.datasets == ("data18_13TeV:data18_13TeV.00348895.*", "user.jdoe:user.jdoe.test")
    assert rucio.pfn_map == {"root://door.uc:1094//pnfs/uc/": "/pnfs/uc/"}
    assert load_config().server.rucio.server == ""  # not configured: not used


def test_rucio_errors_name_the_sub_table(home, tmp_path):
    assert error(write(tmp_path / "a.toml", "[server.rucio]\nbogus = 1\n")).startswith(
        f"{tmp_path / 'a.toml'}: [server.rucio] bogus: unknown key")
    assert error(write(tmp_path / "b.toml", '[server.rucio]\nrefresh = "soon"\n')).endswith(
        "[server.rucio] refresh: not a duration (examples: 30, 30s, 10m, 2h), got 'soon'")
    assert error(write(tmp_path / "c.toml", "[server]\nrucio = 3\n")).endswith(
        "[server.rucio]: expected a table, got 3")
    assert error(write(tmp_path / "d.toml", '[server.rucio]\nserver = "https://r"\naccount = "a"\n'
                                            'username = "u"\npassword = "p"\ndatasets = ["s:*"]\n'
                                            'pfn_map = {"root://d//x/" = "/x/"}\n')).endswith(
        "[server.rucio] rse: the site's RSE is needed to list its replicas")


def test_url_lists_from_the_environment_stay_whole(home):
    """Before: `$BTSWARM_SERVER_WEB_SEED_URLS=http://...` was split on ':' ('http' is not an http:// URL)."""
    door = "http://127.0.0.1:1094/store/{dataset}/{lfn}"
    env = {"BTSWARM_SERVER_WEB_SEED_URLS": f"{door}, https://door2.example:2880/atlas/{{dataset}}/{{lfn}}",
           "BTSWARM_SERVER_TRACKERS": "http://t1.example:6969,http://t2.example:6969",
           "BTSWARM_SERVER_STORAGE_ROOTS": "/pnfs/a:/pnfs/b,/dcache"}
    cfg = load_config(environ=env).server
    assert cfg.web_seed_urls == (door, "https://door2.example:2880/atlas/{dataset}/{lfn}")
    assert cfg.tracker_urls() == ("http://t1.example:6969", "http://t2.example:6969")
    assert cfg.storage_roots == ("/pnfs/a", "/pnfs/b", "/dcache")


def test_split_list_rule():
    from torrents.config import split_list
    assert split_list("/data/a:/data/b") == ["/data/a", "/data/b"]  # $PATH style, as before
    assert split_list("/data/a:") == ["/data/a"]
    assert split_list("http://h:1/x") == ["http://h:1/x"]
    assert split_list("scope:name.*,scope2:other") == ["scope:name.*", "scope2:other"]  # DIDs
    assert split_list(" a , ,b ") == ["a", "b"]
    assert split_list("") == []


def test_a_renamed_variable_is_read_for_one_release_with_a_warning_naming_the_new_one(home, caplog):
    with caplog.at_level("WARNING", logger="btswarm.config"):
        cfg = load_config(environ={"BTSWARM_REPO": "http://repo.example:8080", "BTSWARM_CA_FILE": "/etc/ca.pem"})
    assert cfg.get.repo == "http://repo.example:8080"
    assert cfg.get.ca_file == cfg.server.ca_file == cfg.tracker.ca_file == cfg.repo.ca_file == "/etc/ca.pem"
    said = {r.getMessage() for r in caplog.records}
    assert "$BTSWARM_REPO is deprecated and will be ignored in the next release: use $BTSWARM_GET_REPO" in said
    assert "$BTSWARM_CA_FILE is deprecated and will be ignored in the next release: use $BTSWARM_SERVER_CA_FILE" in said
    caplog.clear()
    with caplog.at_level("WARNING", logger="btswarm.config"):
        cfg = load_config(environ={"BTSWARM_REPO": "http://old.example:1", "BTSWARM_GET_REPO": "http://new.example:2"})
    assert cfg.get.repo == "http://new.example:2"  # the new name wins, and nothing is said of the old
    assert not [r for r in caplog.records if "BTSWARM_REPO" in r.getMessage()]


def test_a_removed_setting_in_a_file_or_the_environment_is_ignored_with_a_warning_saying_why(home, tmp_path, caplog,
                                                                                           monkeypatch):
    import torrents.config
    monkeypatch.setattr(torrents.config, "_said_removed", set())  # said once a process: this test's process
    path = tmp_path / "btswarm.toml"
    path.write_text('[get]\nsite_share = false\nrepo = "http://repo.example:8080"\n')
    with caplog.at_level("WARNING", logger="btswarm.config"):
        cfg = load_config(path, environ={"BTSWARM_GET_SITE_SHARE": "false"})
    assert cfg.get.repo == "http://repo.example:8080"  # the rest of the section is read as before
    said = [r.getMessage() for r in caplog.records]
    why = "is no longer a setting and is ignored: the site-share rules always apply (docs/bt-get.md)"
    assert said.count(f"{path}: [get] site_share {why}") == 1
    assert said.count(f"$BTSWARM_GET_SITE_SHARE {why}") == 1
    path.write_text("[get]\nsite_sharing = false\n")  # a typo is still an unknown key
    with pytest.raises(ConfigError, match="site_sharing: unknown key"):
        load_config(path, environ={})

"""The [access] policy: what is restricted, which path a dataset is, what a token's scope reads."""

from __future__ import annotations

import pytest

from torrents import access
from torrents.access import AccessConfig
from torrents.did import DID
from torrents.errors import ConfigError

ISSUERS = {"https://iam.example": "https://btswarm.example"}


def test_nothing_is_restricted_by_default():
    assert not access.NONE.is_restricted("atlas:data18.AOD")
    assert not access.is_restricted("atlas:data18.AOD", access.NONE)
    assert not access.is_restricted("plain_directory_dataset", access.NONE)


@pytest.mark.parametrize("name, restricted", [
    ("atlas:data18.AOD", True),            # the whole scope
    (DID("atlas", "x"), True),
    ("atlasX:data18.AOD", False),          # another scope, however alike
    ("cms:Run2018A.MINIAOD", True),        # a pattern
    ("cms:Run2017A.MINIAOD", False),
    ("atlas", False),                      # a directory dataset named like a scope is no DID
    ("data18.AOD", False),
])
def test_scopes_and_patterns(name, restricted):
    config = AccessConfig(restricted=("atlas", "cms:Run2018*"), issuers=ISSUERS)
    assert config.is_restricted(name) is restricted


@pytest.mark.parametrize("values, key, problem", [
    ({"restricted": ("at/las",), "issuers": ISSUERS}, "restricted", "not a Rucio scope"),
    ({"restricted": ("cms:Run/2018",), "issuers": ISSUERS}, "restricted", "bad name pattern"),
    ({"issuers": {"http://iam.example": "aud"}}, "issuers", "an https:// URL"),
    ({"issuers": {"https://iam.example": ""}}, "issuers", "needs the audience"),
])
def test_bad_configuration_names_the_key(values, key, problem):
    with pytest.raises(ConfigError) as err:
        AccessConfig(**values)
    assert err.value.subject == key and problem in err.value.problem


def test_the_section_loads_from_the_file_and_the_environment(tmp_path):
    f = tmp_path / "config.toml"
    f.write_text('[access]\nrestricted = ["atlas", "cms:Run2018*"]\n'
                 '[access.issuers]\n"https://iam.example" = "https://btswarm.example"\n')
    config = access.load(f, environ={})
    assert config.restrictions == (access.Restriction("atlas", "*"), access.Restriction("cms", "Run2018*"))
    assert config.issuers == ISSUERS
    env = {"BTSWARM_ACCESS_RESTRICTED": "lhcb", "BTSWARM_ACCESS_ISSUERS": "https://other.example=aud"}
    assert access.load(f, environ=env).is_restricted("lhcb:x")
    # No issuer: loaded (the peer wire's certificates need no token), and the services say what it means.
    bare = tmp_path / "bare.toml"
    bare.write_text('[access]\nrestricted = ["atlas"]\n')
    assert access.load(bare, environ={}).unreadable().startswith("[access] restricted names datasets but")
    assert config.unreadable() is None


def test_paths_and_the_scope_a_refusal_names():
    assert access.dataset_path("atlas:data18.AOD") == "/atlas/data18.AOD"
    assert access.required_scope("atlas:data18.AOD") == "storage.read:/atlas"


@pytest.mark.parametrize("scopes, name, reads", [
    (["storage.read:/atlas"], "atlas:d1", True),
    (["storage.read:/atlas/"], "atlas:d1", True),
    (["storage.read:/atlas/d1"], "atlas:d1", True),
    (["storage.read:/atlas/d1"], "atlas:d10", False),   # a path, not a prefix of characters
    (["storage.read:/atlas/d1/file.root"], "atlas:d1", False),  # one file of it does not read the dataset
    (["storage.read:/"], "atlas:d1", True),
    (["storage.read"], "atlas:d1", True),
    (["storage.read:/cms"], "atlas:d1", False),
    (["storage.read:/atlasx"], "atlas:d1", False),
    (["storage.modify:/atlas", "storage.create:/atlas"], "atlas:d1", False),
    (["storage.read:/atlas/../cms"], "cms:d1", False),
    (["openid", "offline_access"], "atlas:d1", False),
])
def test_what_a_token_reads(scopes, name, reads):
    assert access.covers(access.read_paths(scopes), name) is reads


def test_visibility_and_its_sql_form():
    config = AccessConfig(restricted=("atlas",), issuers=ISSUERS)
    assert access.visible(config, (), "cms:d1")
    assert not access.visible(config, (), "atlas:d1")
    assert access.visible(config, ("/atlas",), "atlas:d1")
    assert access.granted_globs(("/", "/atlas", "/atlas/d1", "/atlas/d[1]", "/a/b/c")) == ("*", "atlas:*", "atlas:d1")
    assert [r.glob() for r in config.restrictions] == ["atlas:*"]

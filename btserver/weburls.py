"""Where a site's web seeds are: the BEP 19 base URLs it lists for its datasets. Pure.

A BEP 19 client of a multi-file torrent asks `BASE + NAME + "/" + LFN` (each
part percent-quoted). A site offers:

- its own listener (`[server] web_listen`): `WEB_URL/data/`;
- its existing doors (`[server] web_seed_urls`): URL templates such as
  `https://door.example:2880/pnfs/example.org/atlas/{dataset}/{lfn}`. The
  template must end in `{dataset}/{lfn}`, because that is what a BEP 19
  client appends; its prefix is the base, and clients go to the door
  directly. A door laid out otherwise (hashed Rucio paths) cannot be listed:
  redirecting each file there from the site's listener was tried, and
  libtorrent 2.1.1 fetched the first file through the redirect, then failed
  the web seed it had made for it.
"""

from __future__ import annotations

from torrents.errors import ConfigError

DATA_PREFIX = "/data/"
SUFFIX = "{dataset}/{lfn}"


def check_template(key: str, template: str) -> None:
    """A door template: an http(s) URL ending in `{dataset}/{lfn}`, no other placeholder, no query."""
    if not template.startswith(("http://", "https://")):
        raise ConfigError(key, f"{template!r} is not an http:// or https:// URL")
    if not template.endswith("/" + SUFFIX):
        raise ConfigError(key, f"{template!r} does not end in /{SUFFIX} (a BEP 19 client appends the dataset "
                               "name and the LFN to a base URL)")
    prefix = direct_base(template)
    if "{" in prefix or "}" in prefix or "?" in prefix or "#" in prefix:
        raise ConfigError(key, f"{template!r}: the part before /{SUFFIX} may hold no placeholder, query or "
                               "fragment")


def direct_base(template: str) -> str:
    """A checked template's base: everything before `{dataset}/{lfn}`."""
    return template[: -len(SUFFIX)]


def own_base(web_url: str) -> str:
    return web_url.rstrip("/") + DATA_PREFIX


def bases(web_url: str, templates: tuple[str, ...]) -> list[str]:
    """Every base URL a site offers for its datasets ('' web_url: no listener of its own)."""
    return ([own_base(web_url)] if web_url else []) + [direct_base(t) for t in templates]

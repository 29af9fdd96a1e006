"""Where a site's web seeds are (BEP 19 base URLs per dataset), and the door templates behind them. Pure.

A BEP 19 client of a multi-file torrent asks `BASE + NAME + "/" + LFN` (each
part percent-quoted). A site lists, per dataset:

- its own listener (`[server] web_listen`): `WEB_URL/data/`;
- each door template (`[server] web_seed_urls`, e.g.
  `https://door.example:2880/pnfs/example.org/atlas/{dataset}/{lfn}`): when the
  template ends in `{dataset}/{lfn}` and has no other placeholder, its prefix
  is itself a base, and clients go to the door directly; any other shape
  (`.../{lfn}` alone, `{dataset}` twice, a query string) is reached through the
  site's listener, `WEB_URL/door/K/`, which answers each file with a redirect
  to the filled template.
"""

from __future__ import annotations

from torrents import urls
from torrents.errors import ConfigError

DATA_PREFIX = "/data/"
DOOR_PREFIX = "/door/"
SUFFIX = "{dataset}/{lfn}"
PLACEHOLDER_NAMES = ("{dataset}", "{lfn}")


def check_template(key: str, template: str) -> None:
    """A door template: an http(s) URL holding `{lfn}`, with no placeholder but `{dataset}` and `{lfn}`."""
    if not template.startswith(("http://", "https://")):
        raise ConfigError(key, f"{template!r} is not an http:// or https:// URL")
    if "{lfn}" not in template:
        raise ConfigError(key, f"{template!r} has no {{lfn}} (where the file's LFN goes)")
    rest = template
    for name in PLACEHOLDER_NAMES:
        rest = rest.replace(name, "")
    if "{" in rest or "}" in rest:
        raise ConfigError(key, f"{template!r}: only {{dataset}} and {{lfn}} may stand in braces")


def direct_base(template: str) -> str | None:
    """The template's prefix when a BEP 19 client can use it as a base itself, else None."""
    if not template.endswith(SUFFIX):
        return None
    prefix = template[: -len(SUFFIX)]
    if "{" in prefix or "?" in prefix or "#" in prefix or not prefix.endswith("/"):
        return None
    return prefix


def own_base(web_url: str) -> str:
    return web_url.rstrip("/") + DATA_PREFIX


def door_base(web_url: str, index: int) -> str:
    return f"{web_url.rstrip('/')}{DOOR_PREFIX}{index}/"


def bases(web_url: str, templates: tuple[str, ...]) -> list[str]:
    """Every base URL a site offers for its datasets ('' web_url: no listener of its own)."""
    out = [own_base(web_url)] if web_url else []
    for k, template in enumerate(templates):
        base = direct_base(template)
        if base is None:
            if not web_url:
                continue  # refused by ServerConfig: a redirected door needs the site's listener
            base = door_base(web_url, k)
        out.append(base)
    return out


def door_location(templates: tuple[str, ...], index: int, name: str, lfn: str) -> str | None:
    """Where `/door/INDEX/NAME/LFN` sends a client: the template filled in, or None (no such door)."""
    if not 0 <= index < len(templates) or direct_base(templates[index]) is not None:
        return None
    return urls.fill_template(templates[index], name, lfn)

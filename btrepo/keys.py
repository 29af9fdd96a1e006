"""Typed keys for what the repository app shares between handlers (aiohttp AppKey)."""

from __future__ import annotations

from aiohttp import web

from torrents import auth
from torrents.access import AccessConfig
from torrents.servicekit.issuers import Issuers
from btrepo.cache import CatalogCache
from btrepo.config import RepoConfig
from btrepo.db import Database
from btrepo.metrics import Metrics
from btrepo.tracker_client import SwarmSource

CONFIG = web.AppKey("repo_config", RepoConfig)
DB = web.AppKey("repo_db", Database)
TRACKER = web.AppKey("repo_tracker", SwarmSource)
VERIFIER = web.AppKey("repo_verifier", auth.Verifier)
METRICS = web.AppKey("repo_metrics", Metrics)
CACHE = web.AppKey("repo_cache", CatalogCache)
ACCESS = web.AppKey("repo_access", AccessConfig)
ISSUERS = web.AppKey("repo_issuers", Issuers)

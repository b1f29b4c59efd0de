"""The ``EMQ`` settings dict, read lazily and cached.

Nothing is read at import time. :func:`emq_settings` reads ``settings.EMQ``
on first use and caches the result; the cache is cleared when a test (or
anything else) changes ``EMQ``, ``DEBUG``, ``BASE_DIR`` or ``AUTH_USER_MODEL``
(see :func:`on_setting_changed`, connected in ``EMQConfig.ready()``).

Invalid values are reported by the system checks (``emq.E002``); using the
settings while they are invalid raises :class:`ConfigurationError` naming
every problem. The settings page of the documentation is the reference of
every key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import conf_values as parse
from .conf_values import ALL_QUEUES
from .exceptions import ConfigurationError
from .schedules import Schedule
from .schedules import parse as parse_schedules
from .url import EMBEDDED

#: The documentation site; hints and messages point at pages under it.
DOCS = "https://django-emq.readthedocs.io/en/latest/"

#: Every key ``EMQ`` may hold; anything else is reported by ``emq.W001``.
KNOWN_KEYS: frozenset[str] = frozenset(
    {
        "URL",
        "EMBEDDED_DIR",
        "LANE_BRANDS",
        "LEASE",
        "MAX_ATTEMPTS",
        "MAX_EXPIRIES",
        "RESULT_TTL",
        "MAX_PAYLOAD",
        "RETRY_BACKOFF",
        "RETRY_BACKOFF_MAX",
        "BEAT",
        "ENQUEUE_TIMEOUT",
        "SHUTDOWN_GRACE",
        "PREFETCH",
        "THREADS",
        "SHARDS",
        "MAX_DEPTH",
        "RATE",
        "FAIRNESS",
        "SCHEDULES",
        "METRICS_TOKEN",
        "HISTORY",
        "TENANT",
    }
)

#: The keys a backend may set for itself in ``TASKS[alias]["OPTIONS"]`` (how its
#: jobs are run and kept); the others (the server, lane brands, shards, the lane
#: policies' per-queue defaults) are global.
BACKEND_KEYS: frozenset[str] = frozenset(
    {
        "LEASE",
        "MAX_ATTEMPTS",
        "MAX_EXPIRIES",
        "RESULT_TTL",
        "MAX_PAYLOAD",
        "RETRY_BACKOFF",
        "RETRY_BACKOFF_MAX",
        "BEAT",
        "SHUTDOWN_GRACE",
        "PREFETCH",
        "HISTORY",
    }
)

#: Defaults of the keys whose default does not depend on other settings.
DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "LEASE": 30.0,
        "MAX_ATTEMPTS": 3,
        "MAX_EXPIRIES": 3,
        "RESULT_TTL": 86400.0,
        "MAX_PAYLOAD": 1024 * 1024,
        "RETRY_BACKOFF": 1.0,
        "RETRY_BACKOFF_MAX": 300.0,
        "BEAT": 2.0,
        "ENQUEUE_TIMEOUT": 5.0,
        "SHUTDOWN_GRACE": 30.0,
        "PREFETCH": 16,
        "HISTORY": 10,
    }
)

#: Threads a worker runs sync tasks on when neither ``--threads`` nor
#: ``EMQ["THREADS"]`` says: at most this many, never more than ``--concurrency``.
#: Each thread may hold a database connection while its job runs.
DEFAULT_THREADS = 16

#: Largest ``EMQ["PREFETCH"]``: what one claim may take at once.
MAX_PREFETCH = 1000
#: Largest ``EMQ["HISTORY"]``: worker ids and errors a job's row keeps.
MAX_HISTORY = 1000
#: Longest ``EMQ["LEASE"]``, in seconds (24 hours; a claim refuses longer ones).
MAX_LEASE = 24 * 60 * 60

#: Settings whose change clears the cache.
WATCHED_SETTINGS = frozenset({"EMQ", "DEBUG", "BASE_DIR", "AUTH_USER_MODEL"})


@dataclass(frozen=True, slots=True)
class EMQSettings:
    """The validated ``EMQ`` settings. Durations are in seconds."""

    #: The server URL (``EMQ["URL"]``, else ``$EMQ_URL``), ``None`` if neither is set.
    url: str | None
    #: Whether the embedded server is used: ``URL == "embedded"``, or no URL and DEBUG on.
    embedded: bool
    #: Where the embedded server keeps its data, socket, pid file and log.
    embedded_dir: Path
    #: Lower-cased model label (``"auth.user"``) -> three-letter lane brand.
    lane_brands: Mapping[str, str]
    lease: float
    max_attempts: int
    #: Lease expiries (its worker died or froze) before a job is dead.
    max_expiries: int
    result_ttl: float
    max_payload: int
    retry_backoff: float
    retry_backoff_max: float
    beat: float
    enqueue_timeout: float
    shutdown_grace: float
    #: Most jobs a worker's job thread claims at once (it claims fewer while jobs are long).
    prefetch: int
    #: Threads for sync tasks (``None``: ``min(concurrency, DEFAULT_THREADS)``).
    threads: int | None = None
    #: Queue name -> shard count, for the queues spread over shards (``EMQ["SHARDS"]``).
    shards: Mapping[str, int] = MappingProxyType({})
    #: Queue name -> the most pending jobs a lane may hold (``EMQ["MAX_DEPTH"]``);
    #: the key ``"*"`` applies to every queue not named.
    max_depth: Mapping[str, int] = MappingProxyType({})
    #: Queue name -> ``(count, per_seconds)``: each lane starts at most ``count`` jobs
    #: in any ``per_seconds`` (``EMQ["RATE"]``); ``"*"`` applies to every queue not named.
    rate: Mapping[str, tuple[int, float]] = MappingProxyType({})
    #: Queue name -> ``"count"`` or ``"time"``: what a lane's share of the workers
    #: is measured in (``EMQ["FAIRNESS"]``); ``"*"`` applies to every queue not named.
    fairness: Mapping[str, str] = MappingProxyType({})
    #: Periodic schedules by name (``EMQ["SCHEDULES"]``; see ``django_emq.schedules``).
    schedules: Mapping[str, Schedule] = MappingProxyType({})
    #: The bearer token that opens the metrics and stats views (``None``: only
    #: users with ``django_emq.view_lanes``).
    metrics_token: str | None = None
    #: How many of the latest worker ids and errors a job's row keeps.
    history: int = 10
    #: Where a lane's tenant comes from (``EMQ["TENANT"]``): an attribute name of
    #: the lane's owner, or the dotted path of a callable owner -> tenant.
    tenant: str | None = None

    def brand_for(self, label: str) -> str | None:
        """The lane brand of model ``label`` (``model._meta.label``), any case."""
        return self.lane_brands.get(label.lower())

    def queue_options(self, name: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``Queue`` from these
        settings; with a queue ``name``, its lane policies' defaults too."""
        options: dict[str, Any] = {
            "max_attempts": self.max_attempts,
            "max_expiries": self.max_expiries,
            "result_ttl": timedelta(seconds=self.result_ttl),
            "max_payload": self.max_payload,
            "history": self.history,
        }
        if name is not None:
            options["max_depth"] = self.max_depth.get(name, self.max_depth.get(ALL_QUEUES))
            options["rate"] = self.rate.get(name, self.rate.get(ALL_QUEUES))
            options["fairness"] = self.fairness.get(name, self.fairness.get(ALL_QUEUES, "count"))
        return options


@functools.cache
def emq_settings() -> EMQSettings:
    """The current settings; ``ConfigurationError`` naming every invalid value."""
    values, errors = _read()
    if errors:
        raise ConfigurationError("invalid EMQ settings: " + "; ".join(errors))
    return EMQSettings(**values)


@functools.cache
def backend_settings(alias: str) -> EMQSettings:
    """The settings backend ``alias`` runs with: ``EMQ``, with the keys its
    ``TASKS[alias]["OPTIONS"]`` sets in their place. ``ConfigurationError``
    naming every invalid value."""
    values, errors = _read(alias)
    if errors:
        raise ConfigurationError(f"invalid settings for backend {alias!r}: " + "; ".join(errors))
    return EMQSettings(**values)


def clear_cache() -> None:
    """Forget the cached settings (they are read again on next use)."""
    emq_settings.cache_clear()
    backend_settings.cache_clear()


def option_problems(alias: str) -> list[str]:
    """Every problem of ``TASKS[alias]["OPTIONS"]``: keys that are not backend
    keys, and values that are invalid (alone or with the ``EMQ`` they join)."""
    options = _options(alias)
    if not isinstance(options, Mapping):
        return [f"{_where(alias)} must be a dict, not {type(options).__name__}"]
    errors = [
        f"{_where(alias)}[{key!r}] is set for every backend at once: put it in EMQ"
        if key in KNOWN_KEYS
        else f"{_where(alias)} has an unknown key {key!r}"
        for key in sorted(map(str, options))
        if key not in BACKEND_KEYS
    ]
    if not problems():  # EMQ's own problems are reported once, as emq.E002
        errors += _read(alias)[1]
    return errors


def problems() -> list[str]:
    """Every invalid value in the current settings (empty when all is well)."""
    return _read()[1]


def unknown_keys() -> list[str]:
    """Keys of ``settings.EMQ`` that django-emq does not know, sorted."""
    raw = _raw()
    if not isinstance(raw, Mapping):
        return []
    return sorted(str(key) for key in raw if key not in KNOWN_KEYS)


# -- reading ------------------------------------------------------------------


def _raw() -> object:
    from django.conf import settings

    return getattr(settings, "EMQ", None) or {}


def _options(alias: str) -> object:
    from django.conf import settings

    params = getattr(settings, "TASKS", {}).get(alias, {})
    return params.get("OPTIONS", {}) if isinstance(params, Mapping) else {}


def _where(alias: str) -> str:
    return f"TASKS[{alias!r}]['OPTIONS']"


def _read(alias: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """Parse every key: (field values for :class:`EMQSettings`, error messages).
    With ``alias``, the backend keys of that backend's ``OPTIONS`` win."""
    from django.conf import settings

    raw = _raw()
    errors: list[str] = []
    if not isinstance(raw, Mapping):
        errors.append(f"EMQ must be a dict, not {type(raw).__name__}")
        raw = {}
    options = _options(alias) if alias is not None else {}
    if not isinstance(options, Mapping):
        options = {}
    options = {k: v for k, v in options.items() if k in BACKEND_KEYS}
    raw = {**raw, **options}
    values: dict[str, Any] = {}

    def field(key: str, parse: Callable[[Any], Any], default: Any) -> None:
        try:
            values[key.lower()] = parse(raw.get(key, default))
        except ValueError as exc:
            where = f"{_where(str(alias))}[{key!r}]" if key in options else f"EMQ[{key!r}]"
            errors.append(f"{where} {exc}")
            values[key.lower()] = default

    url, url_error = parse.url_value(raw.get("URL"))
    if url_error:
        errors.append(url_error)
    values["url"] = url
    values["embedded"] = url == EMBEDDED or (url is None and bool(settings.DEBUG))
    field("EMBEDDED_DIR", parse.path_value, parse.default_embedded_dir())
    user_label = str(getattr(settings, "AUTH_USER_MODEL", "auth.User"))
    field("LANE_BRANDS", functools.partial(parse.brands, user_label=user_label), {})
    field("LEASE", parse.positive_duration, DEFAULTS["LEASE"])
    field("MAX_ATTEMPTS", parse.positive_int, DEFAULTS["MAX_ATTEMPTS"])
    field("MAX_EXPIRIES", parse.positive_int, DEFAULTS["MAX_EXPIRIES"])
    field("RESULT_TTL", parse.positive_duration, DEFAULTS["RESULT_TTL"])
    field("MAX_PAYLOAD", parse.positive_int, DEFAULTS["MAX_PAYLOAD"])
    field("RETRY_BACKOFF", parse.duration, DEFAULTS["RETRY_BACKOFF"])
    field("RETRY_BACKOFF_MAX", parse.duration, DEFAULTS["RETRY_BACKOFF_MAX"])
    field("BEAT", parse.positive_duration, DEFAULTS["BEAT"])
    field("ENQUEUE_TIMEOUT", parse.positive_duration, DEFAULTS["ENQUEUE_TIMEOUT"])
    field("SHUTDOWN_GRACE", parse.duration, DEFAULTS["SHUTDOWN_GRACE"])
    # One expiry is final: a worker killed by a job must not take prefetched ones along.
    one_expiry = values.get("max_expiries") == 1
    field("PREFETCH", parse.positive_int, 1 if one_expiry else DEFAULTS["PREFETCH"])
    field("THREADS", parse.optional_positive_int, None)
    field("SHARDS", parse.shards, {})
    field("METRICS_TOKEN", parse.token, None)
    field("HISTORY", parse.positive_int, DEFAULTS["HISTORY"])
    field("MAX_DEPTH", functools.partial(parse.per_queue, parse=parse.positive_int), {})
    field("RATE", functools.partial(parse.per_queue, parse=parse.rate), {})
    field("FAIRNESS", functools.partial(parse.per_queue, parse=parse.fairness), {})
    field("SCHEDULES", parse_schedules, {})
    field("TENANT", parse.tenant_source, None)
    if values["retry_backoff_max"] < values["retry_backoff"]:
        errors.append("EMQ['RETRY_BACKOFF_MAX'] must not be shorter than EMQ['RETRY_BACKOFF']")
    if values["history"] > MAX_HISTORY:
        errors.append(f"EMQ['HISTORY'] must be at most {MAX_HISTORY}, not {values['history']}")
    if values["lease"] > MAX_LEASE:
        errors.append(f"EMQ['LEASE'] must be at most {MAX_LEASE} seconds (24 hours)")
    if values["prefetch"] > MAX_PREFETCH:
        errors.append(f"EMQ['PREFETCH'] must be at most {MAX_PREFETCH}, not {values['prefetch']}")
    if values["beat"] >= values["lease"]:
        errors.append(
            "EMQ['BEAT'] must be shorter than EMQ['LEASE']: the worker extends "
            "leases every beat, so a longer beat lets running jobs' leases expire"
        )
    return values, errors


# The environment reader lives in its own module; it is part of this one's API.
from .env import env_settings as env_settings  # noqa: E402

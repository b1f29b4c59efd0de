"""Every setting of django-emq, declared once: each field of :class:`EMQSettings`
is one key of ``EMQ`` (its name upper-cased), with its type, its parser, its
default, a line saying what it does, and where else it may come from: a
backend's ``TASKS[alias]["OPTIONS"]``, an ``EMQ_<KEY>`` environment variable
(:func:`django_emq.conf.env_settings`), a ``run_emq_worker`` option.

:data:`SETTINGS` is that table, in reading order; :mod:`django_emq.conf` reads
the settings with it, the system checks name its keys, ``env_settings`` casts
by it, and ``run_emq_worker`` builds its options from it. Nothing here reads
Django's settings at import time: the parsers and derived defaults do, when
called.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import conf_values as parse
from .conf_values import ALL_QUEUES
from .engine.policies import POLICIES
from .engine.policies import rate as rate_policy
from .engine.policies import timeshare as timeshare_policy
from .engine.records import MAX_ATTEMPTS_LIMIT, MAX_DELAY_MS, MAX_DEPTH_LIMIT, MAX_LEASE_MS
from .schedules import Schedule
from .schedules import parse as parse_schedules

#: Largest ``PREFETCH``: what one claim may take at once.
MAX_PREFETCH = 1000
#: Largest ``HISTORY``: worker ids and errors a job's row keeps.
MAX_HISTORY = 1000
#: Longest ``LEASE``, in seconds (24 hours: a claim refuses longer ones).
MAX_LEASE = MAX_LEASE_MS // 1000
#: The shortest lease (seconds): a worker extends its leases every beat, and a
#: lease this short already leaves beats of a third of it (33 ms), each a round
#: trip; a shorter one expires between beats, sending its jobs dead as if their
#: worker had died (docs/settings.md).
MIN_LEASE = 0.1
#: Longest value of every other duration, in seconds (366 days, the longest
#: retry delay the engine takes): a bound that keeps every deadline computed
#: from one (a result's expiry, a socket timeout, a wait) in range, so a typo
#: such as ``1e30`` is a check error rather than an ``OverflowError`` at every use.
MAX_DURATION = MAX_DELAY_MS // 1000
_DAY = " seconds (24 hours)"
_LONGEST = " seconds (366 days)"
#: ``PREFETCH`` unless ``MAX_EXPIRIES`` is 1 (then 1).
DEFAULT_PREFETCH = 16
#: Threads a worker runs sync tasks on when neither ``--threads`` nor
#: ``THREADS`` says: at most this many, never more than ``--concurrency``.
#: Each thread may hold a database connection while its job runs.
DEFAULT_THREADS = 16

_EMPTY: Mapping[str, Any] = MappingProxyType({})

#: The metadata key under which a field of :class:`EMQSettings` keeps its :class:`Setting`.
_META = "django_emq"


@dataclass(frozen=True, slots=True)
class Setting:
    """How one key is read. ``key`` is the field's name upper-cased."""

    #: Takes the raw value, answers the parsed one or raises ``ValueError``.
    parse: Callable[[Any], Any]
    #: What it does, in one line (``run_emq_worker --help`` shows it).
    doc: str
    #: The default, used when the key is not set (parsed like a set value).
    default: Any = None
    #: Computes the default from the values read before it (by field name),
    #: instead of ``default``.
    derive: Callable[[Mapping[str, Any]], Any] | None = None
    #: Where a derived default comes from, named in its errors (``$EMQ_URL``).
    source: str | None = None
    #: ``None`` and ``""`` count as not set (the default applies).
    blank_is_unset: bool = False
    #: A backend's ``TASKS[alias]["OPTIONS"]`` may set it in place of ``EMQ``'s.
    backend: bool = False
    #: django-environ's cast of ``EMQ_<KEY>`` for ``env_settings``; ``None``: not
    #: read from the environment.
    env: Any = None
    #: The ``run_emq_worker`` option (``--lease``) that wins over it, also the
    #: name of the :class:`~django_emq.worker.WorkerOptions` field it fills.
    flag: str | None = None
    #: The key (the field's name upper-cased); :data:`SETTINGS` fills it in.
    key: str = ""
    #: The field of :class:`EMQSettings` it fills.
    name: str = ""


def setting(parse: Callable[[Any], Any], doc: str, **how: Any) -> Any:
    """A field of :class:`EMQSettings` declaring one key (see :class:`Setting`)."""
    spec = Setting(parse, doc, **how)
    if spec.derive is None:
        return dataclasses.field(default=spec.default, metadata={_META: spec})
    return dataclasses.field(metadata={_META: spec})


def _embedded_dir(values: Mapping[str, Any]) -> Path:
    return parse.default_embedded_dir()


def _url(values: Mapping[str, Any]) -> str | None:
    return parse.url_from_environment()


def _prefetch(values: Mapping[str, Any]) -> int:
    # One expiry is final: a worker killed by a job must not take prefetched ones along.
    return 1 if values.get("max_expiries") == 1 else DEFAULT_PREFETCH


def _per_queue(item: Callable[[Any], Any]) -> Callable[[Any], Mapping[str, Any]]:
    return functools.partial(parse.per_queue, parse=item)


@dataclass(frozen=True, slots=True, kw_only=True)
class EMQSettings:
    """The validated settings one backend runs with (``EMQ``, with its ``OPTIONS``
    in place). Durations are in seconds. Each field but ``embedded`` is a key."""

    url: str | None = setting(
        parse.url,
        "the server URL; not set: $EMQ_URL, else the embedded server when DEBUG is on",
        derive=_url, source=f"${parse.URL_ENV}", blank_is_unset=True, env=str,
    )  # fmt: skip
    embedded_dir: Path = setting(  # noqa: RUF009 (a dataclasses.field, as every row)
        parse.path_value,
        "where the embedded server keeps its data, socket, pid file and log",
        derive=_embedded_dir, env=str,
    )  # fmt: skip
    #: Lower-cased model label (``"auth.user"``) -> three-letter lane brand.
    lane_brands: Mapping[str, str] = setting(
        parse.brands, "model label -> the three letters its lanes' ids start with",
        default=_EMPTY, env=dict,
    )  # fmt: skip
    lease: float = setting(
        parse.at_most(
            MAX_LEASE,
            parse.at_least(
                MIN_LEASE,
                parse.positive_duration,
                " seconds (shorter leases expire between the beats that extend them)",
            ),
            _DAY,
        ),
        "seconds a claimed job is leased to its worker (extended while it runs)",
        default=30.0, backend=True, env=float, flag="lease",
    )  # fmt: skip
    max_attempts: int = setting(
        parse.at_most(MAX_ATTEMPTS_LIMIT, parse.positive_int),
        "runs of a job that may fail before it is dead",
        default=3, backend=True, env=int,
    )  # fmt: skip
    max_expiries: int = setting(
        parse.at_most(MAX_ATTEMPTS_LIMIT, parse.positive_int),
        "lease expiries (its worker died or froze) before a job is dead",
        default=3, backend=True, env=int,
    )  # fmt: skip
    result_ttl: float = setting(
        parse.at_most(MAX_DURATION, parse.positive_duration, _LONGEST),
        "seconds a finished job's result stays readable",
        default=86400.0, backend=True, env=float,
    )  # fmt: skip
    max_payload: int = setting(
        parse.positive_int, "largest JSON of a job's arguments and of its result, in bytes",
        default=1024 * 1024, backend=True, env=int,
    )  # fmt: skip
    retry_backoff: float = setting(
        parse.at_most(MAX_DURATION, parse.duration, _LONGEST),
        "base delay of a retry in seconds (doubled each attempt, jittered)",
        default=1.0, backend=True, env=float,
    )  # fmt: skip
    retry_backoff_max: float = setting(
        parse.at_most(MAX_DURATION, parse.duration, _LONGEST),
        "longest delay of a retry, in seconds",
        default=300.0, backend=True, env=float,
    )  # fmt: skip
    beat: float = setting(
        parse.at_most(MAX_LEASE, parse.positive_duration, _DAY),
        "seconds between a worker's lease extensions, reaps and promotions",
        default=2.0, backend=True, env=float, flag="beat",
    )  # fmt: skip
    enqueue_timeout: float = setting(
        parse.at_most(MAX_DURATION, parse.positive_duration, _LONGEST),
        "connect and read timeout of the shared client, in seconds",
        default=5.0, env=float,
    )  # fmt: skip
    shutdown_grace: float = setting(
        parse.at_most(MAX_DURATION, parse.duration, _LONGEST),
        "seconds running jobs get to finish on SIGTERM",
        default=30.0, backend=True, env=float, flag="grace",
    )  # fmt: skip
    #: How far a worker claims ahead of its free slots while jobs are short.
    prefetch: int = setting(
        parse.at_most(MAX_PREFETCH, parse.positive_int),
        "most jobs claimed ahead of the free slots, plus one, while jobs are short",
        derive=_prefetch, backend=True, env=int, flag="prefetch",
    )  # fmt: skip
    #: Threads for sync tasks (``None``: ``min(concurrency, DEFAULT_THREADS)``).
    threads: int | None = setting(
        parse.optional_positive_int,
        f"threads for sync tasks, at most --concurrency; unset: min(concurrency, "
        f"{DEFAULT_THREADS})",
        backend=True, env=int, flag="threads",
    )  # fmt: skip
    #: How many of the latest worker ids and errors a job's row keeps.
    history: int = setting(
        parse.at_most(MAX_HISTORY, parse.positive_int),
        "how many of the latest workers, attempt times and errors a job's row keeps",
        default=10, backend=True, env=int,
    )  # fmt: skip
    #: Queue name -> shard count, for the queues spread over shards.
    shards: Mapping[str, int] = setting(
        parse.shards, "queue name -> its number of shards", default=_EMPTY, env=parse.int_values
    )
    #: Queue name -> the most pending jobs a lane may hold; ``"*"``: every queue not named.
    max_depth: Mapping[str, int] = setting(
        _per_queue(parse.at_most(MAX_DEPTH_LIMIT, parse.positive_int)),
        "the most pending jobs a lane may hold, per queue",
        default=_EMPTY, env=int,
    )  # fmt: skip
    #: Queue name -> ``(count, per_seconds)``: each lane starts at most ``count``
    #: jobs in any ``per_seconds``; ``"*"``: every queue not named.
    rate: Mapping[str, tuple[int, float]] = setting(
        _per_queue(rate_policy.parse_setting),
        "(count, per_seconds): the jobs a lane may start, per queue",
        default=_EMPTY,
    )  # fmt: skip
    #: Queue name -> ``"count"`` or ``"time"``: what a lane's share of the
    #: workers is measured in; ``"*"``: every queue not named.
    fairness: Mapping[str, str] = setting(
        _per_queue(timeshare_policy.parse_setting),
        "'count' or 'time': what a lane's share is measured in",
        default=_EMPTY, env=str,
    )  # fmt: skip
    #: Periodic schedules by name (see ``django_emq.schedules``).
    schedules: Mapping[str, Schedule] = setting(
        parse_schedules, "periodic schedules by name", default=_EMPTY
    )
    #: The bearer token that opens the metrics and stats views (``None``: only
    #: users with ``django_emq.view_lanes``).
    metrics_token: str | None = setting(
        parse.token, "the bearer token that opens the metrics views", env=str
    )
    #: Where a lane's tenant comes from: an attribute name of the lane's owner,
    #: or the dotted path of a callable owner -> tenant.
    tenant: str | None = setting(parse.tenant_source, "where a lane's tenant comes from", env=str)
    #: Whether the embedded server is used: ``URL == "embedded"``, or no URL and
    #: DEBUG on. Derived, not a key.
    embedded: bool = False

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
            for option in QUEUE_OPTIONS:  # the policies' per-queue defaults
                per_queue: Mapping[str, Any] = getattr(self, BY_KEY[option.key].name)
                options[option.option] = per_queue.get(
                    name, per_queue.get(ALL_QUEUES, option.default)
                )
        return options


#: Every key, in the order they are read (a derived default sees the keys before it).
SETTINGS: tuple[Setting, ...] = tuple(
    dataclasses.replace(f.metadata[_META], key=f.name.upper(), name=f.name)
    for f in dataclasses.fields(EMQSettings)
    if _META in f.metadata
)
#: Each key's :class:`Setting`, by key.
BY_KEY: Mapping[str, Setting] = MappingProxyType({s.key: s for s in SETTINGS})
#: The keys a backend may set for itself in ``TASKS[alias]["OPTIONS"]``.
BACKEND_KEYS: frozenset[str] = frozenset(s.key for s in SETTINGS if s.backend)
#: The ``Queue`` keywords the lane policies fill from per-queue settings.
QUEUE_OPTIONS = tuple(option for policy in POLICIES for option in policy.options)
#: The keys a ``run_emq_worker`` option wins over.
FLAGGED: tuple[Setting, ...] = tuple(s for s in SETTINGS if s.flag)


@dataclass(frozen=True, slots=True)
class Rule:
    """A condition on several keys at once; ``message`` names them as
    ``{KEY}``, filled with where each value came from."""

    keys: tuple[str, ...]
    holds: Callable[..., bool]
    message: str


#: Conditions between keys, checked once each of their keys is valid.
RULES: tuple[Rule, ...] = (
    Rule(
        ("RETRY_BACKOFF", "RETRY_BACKOFF_MAX"),
        lambda base, longest: longest >= base,
        "{RETRY_BACKOFF_MAX} must not be shorter than {RETRY_BACKOFF}",
    ),
    Rule(
        ("BEAT", "LEASE"),
        lambda beat, lease: beat < lease,
        "{BEAT} must be shorter than {LEASE}: the worker extends leases every beat, "
        "so a longer beat lets running jobs' leases expire",
    ),
)

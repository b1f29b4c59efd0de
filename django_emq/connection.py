"""The process's Valkey connection, built lazily from settings.

The server is named by ``EMQ["URL"]``, else the ``EMQ_URL`` environment
variable. Projects usually read it with django-environ in their settings::

    import environ

    env = environ.Env()
    EMQ = {"URL": env.str("EMQ_URL", default=None)}

The library itself reads only ``settings.EMQ["URL"]``, then
``os.environ["EMQ_URL"]``. Accepted schemes: ``redis://``, ``rediss://``,
``valkey://``, ``valkeys://`` and ``unix://`` (see :mod:`django_emq.url`); a
cluster URL (``valkey+cluster://host:port[,host:port...]``) gives a
:class:`~redis.cluster.RedisCluster` client instead (see ``docs/cluster.md``).
With no URL and ``DEBUG`` on, or with the URL ``"embedded"``, the embedded
server of :mod:`django_emq.embedded` is started (or reused).

:func:`get_connection` gives one thread-safe client, so one connection pool,
per process, rebuilt after a fork. Its socket timeouts are
``EMQ["ENQUEUE_TIMEOUT"]`` so a web request never waits longer than that on
the server. Workers take their own client for blocking pops from
:func:`new_connection`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import BlockingConnectionPool
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from . import embedded
from .conf import emq_settings
from .conf_values import URL_ENV
from .engine.client import Client
from .exceptions import ConfigurationError
from .url import is_cluster_url, normalize_url, parse_cluster_url

#: Oldest servers the Lua scripts run on (``LMOVE`` is new in Redis 6.2), by server name.
MIN_VERSIONS: Mapping[str, tuple[int, ...]] = {"redis": (6, 2), "valkey": (7,)}

#: Connections one client's pool holds at most (redis-py's own default); more
#: threads than that wait their turn for one (see :func:`build_client`).
MAX_CONNECTIONS = 100

_LEADING_DIGITS = re.compile(r"[0-9]+")

_lock = threading.Lock()
_client: Client | None = None
_pid: int | None = None


def server_url() -> str:
    """The URL to connect to, starting the embedded server first if it is the one used."""
    conf = emq_settings()
    if conf.embedded:
        return embedded.ensure_running(conf.embedded_dir)
    if conf.url is None:
        raise ConfigurationError(
            f'no Valkey server configured: set EMQ = {{"URL": ...}} or the {URL_ENV} '
            'environment variable (or EMQ = {"URL": "embedded"} for the embedded server)'
        )
    return conf.url


def build_client(url: str, socket_timeout: float | None, connect_timeout: float) -> Client:
    """A new client for ``url`` with its own pool; a failed command is not retried.

    The pool holds at most :data:`MAX_CONNECTIONS` connections; a thread that
    finds them all busy (more threads than that in calls at once, say while
    the server stalls) waits for one, up to ``connect_timeout``, instead of
    failing at once with ``MaxConnectionsError`` as redis-py's default pool
    does. A thread that still finds none gets a ``redis.ConnectionError``.
    (A cluster client keeps redis-py's pool per node, which raises there.)

    No retry: a retried call could wait twice the timeout, and the caller
    knows better whether its command may run twice. A cluster client still
    follows ``MOVED``/``ASK`` redirections, and after a connection error it
    reloads the slot map, so the next call reaches a promoted replica.
    """
    if is_cluster_url(url):
        cluster = parse_cluster_url(url)
        try:  # a cluster client connects at once, to learn the slots
            return RedisCluster(
                startup_nodes=[
                    ClusterNode(host, port)  # type: ignore[no-untyped-call]
                    for host, port in cluster.seeds
                ],
                socket_timeout=socket_timeout,
                socket_connect_timeout=connect_timeout,
                retry=Retry(NoBackoff(), 0),
                **cluster.options,
            )
        except RedisClusterException as exc:  # no seed answered: as one server down
            raise redis.ConnectionError(f"no node of the cluster answered: {exc}") from exc
    pool = BlockingConnectionPool.from_url(
        normalize_url(url),
        max_connections=MAX_CONNECTIONS,
        timeout=connect_timeout,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 0),
    )
    client = redis.Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # close() closes the pool too
    return client


def get_connection() -> Client:
    """The process's shared client, built on first use (and again after a fork)."""
    global _client, _pid
    client, pid = _client, _pid
    if client is not None and pid == os.getpid():
        return client
    with _lock:
        if _client is None or _pid != os.getpid():
            # After a fork the parent's client is dropped, not closed: its
            # sockets belong to the parent.
            timeout = emq_settings().enqueue_timeout
            _client = build_client(server_url(), timeout, timeout)
            _pid = os.getpid()
        return _client


def new_connection(socket_timeout: float | None) -> Client:
    """A client of its own (for a worker's blocking pops), not shared, not cached.

    ``socket_timeout`` bounds every read (``None``: wait as long as the
    command blocks); connecting is bounded by ``EMQ["ENQUEUE_TIMEOUT"]``.
    The caller closes it.
    """
    return build_client(server_url(), socket_timeout, emq_settings().enqueue_timeout)


def reset_connection() -> None:
    """Forget the shared client (settings changed); the next use builds a new one."""
    global _client, _pid
    with _lock:
        client, _client, _pid = _client, None, None
    if client is not None:
        client.close()


# -- server version -----------------------------------------------------------


def parse_version(text: object) -> tuple[int, ...]:
    """``"7.2.4"`` -> ``(7, 2, 4)``; ``"7.0.0-rc1"`` -> ``(7, 0, 0)``.

    Each dotted part contributes its leading digits; reading stops at the
    first part that does not start with one.
    """
    parts: list[int] = []
    for part in str(text).split("."):
        digits = _LEADING_DIGITS.match(part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def version_from_info(info: Mapping[str, Any]) -> tuple[str, tuple[int, ...]]:
    """(server name, version) from an ``INFO server`` reply.

    Valkey reports ``valkey_version`` (8+) or ``server_name:valkey`` (7.2)
    next to a Redis-compatible ``redis_version``; Redis only the latter.
    """
    if "valkey_version" in info:
        return "valkey", parse_version(info["valkey_version"])
    name = "valkey" if str(info.get("server_name", "")).lower() == "valkey" else "redis"
    return name, parse_version(info.get("redis_version", ""))


def unsupported_reason(name: str, version: tuple[int, ...]) -> str | None:
    """Why ``name`` ``version`` cannot run django-emq, or ``None`` if it can."""
    minimum = MIN_VERSIONS.get(name, MIN_VERSIONS["redis"])
    if version >= minimum:
        return None
    shown = ".".join(map(str, version)) or "unknown"
    return (
        f"{name} {shown} is too old: django-emq needs Valkey >= 7 or Redis >= 6.2 "
        "(its scripts rotate the ring with LMOVE, new in Redis 6.2)"
    )


def server_version(client: Client) -> tuple[str, tuple[int, ...]]:
    """(server name, version) of the server behind ``client``."""
    info: dict[str, Any] = client.info("server")
    return version_from_info(info)


def require_supported_server(client: Client) -> None:
    """Raise ``ConfigurationError`` unless the server is Valkey >= 7 or Redis >= 6.2."""
    reason = unsupported_reason(*server_version(client))
    if reason is not None:
        raise ConfigurationError(reason)

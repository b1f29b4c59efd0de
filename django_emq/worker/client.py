"""The worker's clients of Valkey (``redis.asyncio``). What runs on them is the
engine's :class:`~django_emq.engine.runner.AsyncRunner`.

A worker's claim carries every outcome it records and a history call every
first start and finished job: hundreds of arguments a call. ``redis.asyncio``
packs a command in Python, copying the text packed so far once per argument;
redis-py's sync client packs with hiredis, in C. The worker's connections to
one server pack as the sync client does (:func:`packed_by_hiredis`): the same
bytes on the wire, the same errors for what a command cannot carry
(``DataError``), a fraction of the cost.
"""

from __future__ import annotations

from typing import Any, cast

import hiredis
import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.connection import HiredisRespSerializer
from redis.maint_notifications import MaintNotificationsConfig
from redis.utils import HIREDIS_AVAILABLE

from ..connection import server_url
from ..url import is_cluster_url, normalize_url, parse_cluster_url

#: A client of one server, or of a Valkey Cluster.
AsyncClient = aredis.Redis | RedisCluster


class HiredisPacking:
    """A ``redis.asyncio`` connection's ``pack_command`` done by hiredis, as
    redis-py's sync connections do it (:class:`~redis.connection.HiredisRespSerializer`)."""

    _packer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        """``args`` packed; a command named in one word (``FCALL``, ``EVALSHA``: every
        call of the hot path) goes to hiredis as it is, anything else (a command
        of two words, a ``bytearray``, an argument no command can carry) through
        redis-py's serializer, which splits, converts or refuses it."""
        if type(args[0]) is str and " " not in args[0]:
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                pass
        return cast(list[bytes], self._packer.pack(*args))


#: The classes :func:`packed_by_hiredis` made, by the class they pack for.
_packed: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def packed_by_hiredis[C: AbstractConnection](connection_class: type[C]) -> type[C]:
    """``connection_class`` packing its commands by hiredis, made once per class
    (the class itself without hiredis, or when it packs its own way already)."""
    if not HIREDIS_AVAILABLE or issubclass(connection_class, HiredisPacking):
        return connection_class
    if connection_class.pack_command is not AbstractConnection.pack_command:
        return connection_class
    made = _packed.get(connection_class)
    if made is None:
        name = f"HiredisPacking{connection_class.__name__}"
        made = _packed[connection_class] = type(name, (HiredisPacking, connection_class), {})
    return cast(type[C], made)


def async_client(socket_timeout: float | None, connect_timeout: float) -> AsyncClient:
    """A new client of the configured server, as :func:`~django_emq.connection.build_client`
    makes them (no retries: the worker decides what may run twice)."""
    url = server_url()
    retry = Retry(NoBackoff(), 0)
    # No maintenance notifications: a round trip per new connection that Valkey refuses.
    quiet = MaintNotificationsConfig(enabled=False)
    if is_cluster_url(url):
        cluster = parse_cluster_url(url)
        options = dict(cluster.options)
        if options.pop("connection_class", None) is not None:  # rediss: TLS
            options["ssl"] = True
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in cluster.seeds],
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=retry,
            maint_notifications_config=quiet,
            **options,
        )
    client: aredis.Redis = aredis.Redis.from_url(
        normalize_url(url),
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        retry=retry,
        maint_notifications_config=quiet,
    )
    pool = client.connection_pool
    pool.connection_class = packed_by_hiredis(pool.connection_class)
    return client

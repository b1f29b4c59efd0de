"""The worker's clients of Valkey (``redis.asyncio``). What runs on them is the
engine's :class:`~django_emq.engine.runner.AsyncRunner`."""

from __future__ import annotations

import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.maint_notifications import MaintNotificationsConfig

from ..connection import server_url
from ..url import is_cluster_url, normalize_url, parse_cluster_url

#: A client of one server, or of a Valkey Cluster.
AsyncClient = aredis.Redis | RedisCluster


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
    return client

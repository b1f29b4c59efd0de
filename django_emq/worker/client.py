"""The worker's asyncio side of Valkey: clients (``redis.asyncio``), scripts
run by EVALSHA (loaded again after a ``SCRIPT FLUSH`` or on a new node), and
parking (a blocking pop on the queues' wake lists, per slot on a cluster)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot
from redis.exceptions import NoScriptError, ResponseError
from redis.maint_notifications import MaintNotificationsConfig

from ..connection import server_url
from ..engine.calls import Call
from ..engine.exceptions import script_error
from ..engine.scripts import sources
from ..exceptions import UNAVAILABLE, ScriptError
from ..url import is_cluster_url, normalize_url, parse_cluster_url

#: A client of one server, or of a Valkey Cluster.
AsyncClient = aredis.Redis | RedisCluster

#: Longest wait on one slot's wake lists while other slots' lists wait their turn.
PARK_SLICE = 0.05
#: Shortest wait passed to ``BLPOP`` (0 would mean "forever").
MIN_WAIT = 0.01


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


#: Most script calls in flight at once on one client: well under redis-py's pool of
#: 100 connections, which refuses (``MaxConnectionsError``) rather than waits.
MAX_CALLS = 48


class AsyncScripts:
    """Runs the engine's :class:`~django_emq.calls.Call` values on an async client,
    at most :data:`MAX_CALLS` at once (hundreds of jobs may end together)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._calls = asyncio.Semaphore(MAX_CALLS)
        self._shas = {
            name: (src.numkeys, hashlib.sha1(src.source.encode()).hexdigest(), src.source)
            for name, src in sources().items()
        }

    async def __call__(self, call: Call) -> Any:
        numkeys, sha, _ = self._command(call)
        async with self._calls:
            try:
                try:
                    return await self.client.evalsha(sha, numkeys, *call.keys, *call.args)
                except NoScriptError:
                    await self.load_script(call)
                    return await self.client.evalsha(sha, numkeys, *call.keys, *call.args)
            except ResponseError as exc:  # a key of the wrong type: CorruptKeyspace
                raise script_error(exc) from None

    def queue(self, pipe: Any, call: Call) -> None:
        """Queue ``call`` on ``pipe`` as a bare EVALSHA; a ``NoScriptError`` reply
        means it did not run (call :meth:`load_script`, then run it again)."""
        numkeys, sha, _ = self._command(call)
        pipe.execute_command("EVALSHA", sha, numkeys, *call.keys, *call.args)

    async def load_script(self, call: Call) -> None:
        """Load ``call``'s script where its keys live (on a cluster: that node alone,
        so a primary that is down elsewhere does not stop it)."""
        _, _, source = self._command(call)
        if isinstance(self.client, RedisCluster):
            cluster = self.client
            node = cluster.get_node_from_key(call.keys[0])
            await cluster.execute_command("SCRIPT LOAD", source, target_nodes=node)
        else:
            client = self.client
            await client.execute_command("SCRIPT LOAD", source)  # type: ignore[no-untyped-call]

    def _command(self, call: Call) -> tuple[int, str, str]:
        numkeys, sha, source = self._shas[call.script]
        if len(call.keys) != numkeys:
            raise ScriptError(f"{call.script} takes {numkeys} keys, got {len(call.keys)}")
        return numkeys, sha, source


def wake_groups(client: AsyncClient, keys: Sequence[str]) -> list[list[str]]:
    """``keys`` grouped so one ``BLPOP`` may wait on each group: all of them on one
    server, one group per slot on a cluster."""
    if not isinstance(client, RedisCluster):
        return [list(keys)]
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault(key_slot(key.encode()), []).append(key)
    return list(groups.values())


async def park(client: AsyncClient, groups: Sequence[Sequence[str]], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for a wake token on any group's lists; True
    when one was popped. On a cluster each slot's lists are waited on in turn,
    :data:`PARK_SLICE` at a time; a group whose node cannot answer is passed
    over, and its error raised only when no group's node answers."""
    if len(groups) == 1:
        return await client.blpop(list(groups[0]), timeout=max(MIN_WAIT, timeout)) is not None
    deadline = time.monotonic() + timeout
    while True:
        failed: list[Exception] = []
        for group in groups:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                wait = max(MIN_WAIT, min(PARK_SLICE, left))
                if await client.blpop(list(group), timeout=wait) is not None:
                    return True
            except UNAVAILABLE as exc:
                failed.append(exc)
        if len(failed) == len(groups):
            raise failed[0]

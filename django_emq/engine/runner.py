"""The runners: what sends an :class:`~django_emq.engine.ops.Op` to Valkey.

How an operation runs is written once, in :class:`Steps`: EVALSHA of the
script, and after a ``SCRIPT FLUSH`` (or on a new node, a promoted replica)
``SCRIPT LOAD`` and EVALSHA again; on a Valkey Cluster the load goes to the
node of the call's slot alone (redis-py's ``SCRIPT LOAD`` goes to every
primary, and fails while any one of them is down); a script's error reply
read by :func:`~django_emq.engine.exceptions.script_error`; a batch of calls
in one pipeline (queued as plain ``EVALSHA`` commands: a cluster pipeline
refuses ``pipe.evalsha()``), its ``NOSCRIPT`` replies loaded and run again;
an operation that works in batches repeated; a worker parked on wake lists.

:class:`Steps` is written as coroutines and touches the client in one place,
:meth:`Steps.io`, which only differs between the two runners:

* :class:`SyncRunner` (``redis.Redis``, ``RedisCluster``) for the API, the
  admin and the tests: its ``io`` hands back what the client answered, so its
  coroutines never wait, and each call completes at once (:func:`now`);
* :class:`AsyncRunner` (``redis.asyncio``, its cluster client) for the worker:
  its ``io`` awaits, at most :data:`MAX_CALLS` at once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Coroutine, Sequence
from functools import cache
from typing import Any

import redis.asyncio as aredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from . import parking
from .calls import Call
from .client import Client
from .exceptions import ScriptError, script_error
from .ops import Op
from .scripts import sources

#: Most calls in flight at once on one async client: well under redis-py's pool of
#: 100 connections, which refuses (``MaxConnectionsError``) rather than waits.
MAX_CALLS = 48


def now[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """The answer of a coroutine that never waits (a :class:`SyncRunner`'s)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a sync runner's step waited on an event loop")


class ScriptBook:
    """Every script's key count, SHA1 and source, by operation name."""

    def __init__(self) -> None:
        self._by_name = {
            name: (src.numkeys, hashlib.sha1(src.source.encode()).hexdigest(), src.source)
            for name, src in sources().items()
        }

    def evalsha(self, call: Call) -> tuple[Any, ...]:
        """The ``EVALSHA`` command's words for ``call``; ``ScriptError`` if its
        key count is not the script's."""
        numkeys, sha, _ = self._by_name[call.script]
        if len(call.keys) != numkeys:
            raise ScriptError(f"{call.script} takes {numkeys} keys, got {len(call.keys)}")
        return ("EVALSHA", sha, numkeys, *call.keys, *call.args)

    def source(self, call: Call) -> str:
        return self._by_name[call.script][2]


@cache
def script_book() -> ScriptBook:
    """The one :class:`ScriptBook` of this process (its hashes computed once)."""
    return ScriptBook()


class Steps:
    """How operations run, written once over ``client`` (a sync or an async one);
    every command goes through :meth:`io`."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.clustered = isinstance(client, RedisCluster | AsyncRedisCluster)
        self.book = script_book()

    async def io(self, sent: Any) -> Any:
        """What the client answered to a command just sent: ``sent`` itself for a
        sync client (an async runner awaits it)."""
        return sent

    async def script(self, call: Call) -> Any:
        """Run ``call``'s script; its raw reply. A missing script is loaded where
        the call's keys live and run again; an error reply that names a corrupt
        key raises :class:`~django_emq.exceptions.CorruptKeyspace`."""
        words = self.book.evalsha(call)
        try:
            try:
                return await self.io(self.client.execute_command(*words))
            except NoScriptError:
                await self.load_script(call)
                return await self.io(self.client.execute_command(*words))
        except ResponseError as exc:
            mapped = script_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def load_script(self, call: Call) -> None:
        """Load ``call``'s script where its keys live (on a cluster: that node
        alone, so a primary that is down elsewhere does not stop it)."""
        source = self.book.source(call)
        if self.clustered:
            cluster = self.client
            node = cluster.get_node_from_key(call.keys[0])
            await self.io(cluster.execute_command("SCRIPT LOAD", source, target_nodes=node))
        else:
            await self.io(self.client.execute_command("SCRIPT LOAD", source))

    async def run[T](self, op: Op[T]) -> T:
        """Run ``op``; its parsed reply (a refusal raises)."""
        return op.parse(await self.script(op.call))

    async def run_all[T](self, op: Op[T]) -> list[T]:
        """Run ``op`` again while its reply asks for the next batch; every reply."""
        replies = [await self.run(op)]
        while op.again is not None and op.again(replies[-1]):
            replies.append(await self.run(op))
        return replies

    async def replies(self, batch: Sequence[Call]) -> list[Any]:
        """Run ``batch`` in one pipeline (one round trip); the raw replies in
        order, an error reply in its place (read by ``script_error``). Calls
        the server had no script for (after a ``SCRIPT FLUSH``: they did not
        run) are run again once their scripts are loaded, in one more round trip."""
        replies = await self._pipelined(batch)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            loaded: set[tuple[str, str]] = set()
            for i in missing:
                call = batch[i]
                where = (call.script, call.keys[0] if self.clustered else "")
                if where not in loaded:
                    loaded.add(where)
                    await self.load_script(call)
            again = await self._pipelined([batch[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return [script_error(reply) if isinstance(reply, Exception) else reply for reply in replies]

    async def _pipelined(self, batch: Sequence[Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for call in batch:
            pipe.execute_command(*self.book.evalsha(call))
        replies: list[Any] = await self.io(pipe.execute(raise_on_error=False))
        return replies

    async def run_many(self, ops: Sequence[Op[Any]]) -> list[Any]:
        """Run ``ops`` in one pipeline; each one's parsed reply, or in its place
        what refused it (an error reply, or the refusal its parser raised)."""
        answers: list[Any] = []
        for op, reply in zip(ops, await self.replies([op.call for op in ops]), strict=True):
            if isinstance(reply, Exception):
                answers.append(reply)
                continue
            try:
                answers.append(op.parse(reply))
            except Exception as exc:
                answers.append(exc)
        return answers

    async def blpop(self, keys: list[str], timeout: float) -> Any:
        """``BLPOP keys timeout``: a wake token, or ``None`` when the time ran out."""
        return await self.io(self.client.blpop(keys, timeout=timeout))

    def wake_groups(self, keys: Sequence[str]) -> list[list[str]]:
        """``keys`` grouped so one ``BLPOP`` may wait on each group (see :mod:`.parking`)."""
        return parking.wake_groups(keys, self.clustered)

    async def park(self, groups: Sequence[Sequence[str]], timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a wake token on any group's lists;
        True when one was popped (see :func:`.parking.park`)."""
        return await parking.park(self.blpop, groups, timeout)


class AsyncRunner(Steps):
    """:class:`Steps` on a ``redis.asyncio`` client (or its cluster client), at
    most :data:`MAX_CALLS` commands in flight at once (hundreds of jobs may end
    together): the worker's runner."""

    def __init__(self, client: aredis.Redis | AsyncRedisCluster) -> None:
        super().__init__(client)
        self._calls = asyncio.Semaphore(MAX_CALLS)

    async def io(self, sent: Any) -> Any:
        async with self._calls:
            return await sent


class SyncRunner:
    """:class:`Steps` on a ``redis.Redis`` (or ``RedisCluster``) client, each call
    answered at once: the runner of the API, the admin and the tests.
    ``steps`` are its coroutines, for a caller that composes several (a
    rotation over queues) and completes them with :func:`now`."""

    def __init__(self, client: Client) -> None:
        self.steps = Steps(client)

    def run[T](self, op: Op[T]) -> T:
        return now(self.steps.run(op))

    def run_all[T](self, op: Op[T]) -> list[T]:
        return now(self.steps.run_all(op))

    def run_many(self, ops: Sequence[Op[Any]]) -> list[Any]:
        return now(self.steps.run_many(ops))

    def replies(self, batch: Sequence[Call]) -> list[Any]:
        return now(self.steps.replies(batch))

    def script(self, call: Call) -> Any:
        return now(self.steps.script(call))

    def park(self, groups: Sequence[Sequence[str]], timeout: float) -> bool:
        return now(self.steps.park(groups, timeout))

    def wake_groups(self, keys: Sequence[str]) -> list[list[str]]:
        return self.steps.wake_groups(keys)

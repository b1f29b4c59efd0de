"""The runners: what sends an :class:`~django_emq.engine.ops.Op` to Valkey.

How an operation runs is written once, in :class:`Steps`: ``FCALL`` of the
operation's function in the engine's Function library
(:func:`~django_emq.engine.scripts.library`: the helpers are built once, when
the library is loaded, not on every call), and when the server does not have
it (a restart without its data, ``FUNCTION FLUSH``, a new node, a promoted
replica, a new release) ``FUNCTION LOAD`` and ``FCALL`` again. A server
without Functions (Redis 6.2) or an ACL user who may not run ``FCALL`` or
``FUNCTION LOAD`` gets the same scripts by ``EVALSHA``, with ``SCRIPT LOAD``
after a ``SCRIPT FLUSH``: the runner learns it from the first refusal and
keeps to it for that client (:meth:`Steps.fall_back`). On a Valkey Cluster
a load goes to the node of the call's slot alone (redis-py's ``SCRIPT LOAD``
and ``FUNCTION LOAD`` go to every primary, and fail while any one of them is
down); a script's error reply read by
:func:`~django_emq.engine.exceptions.script_error`; a batch of calls in one
pipeline (queued as plain commands: a cluster pipeline refuses
``pipe.evalsha()``), the replies of calls the server had no code for loaded
and run again; an operation that works in batches repeated; a worker parked
on wake lists.

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
import re
import weakref
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
from .scripts import library, sources

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


#: The server has no Functions (Redis 6.2: ``FCALL`` or ``FUNCTION`` is an unknown
#: command, quoted with backticks by Redis 6.x and with quotes by later servers),
#: or the ACL refuses the user ``FCALL`` or ``FUNCTION LOAD``.
NO_FUNCTIONS_RE = re.compile(
    r"^unknown command ['`](fcall|function)['`]|no permissions to run the '(fcall|function\|load)'",
    re.IGNORECASE,
)

#: Clients found to run no Functions: every runner on them sends ``EVALSHA``.
_WITHOUT_FUNCTIONS: weakref.WeakSet[Any] = weakref.WeakSet()


def no_functions(reply: Any) -> bool:
    """``reply`` says this server or user runs no Functions."""
    return isinstance(reply, ResponseError) and bool(NO_FUNCTIONS_RE.search(str(reply)))


def missing_code(reply: Any) -> bool:
    """``reply`` says the server does not have the call's code (loaded, it may run)."""
    return isinstance(reply, NoScriptError) or (
        isinstance(reply, ResponseError) and str(reply).startswith("Function not found")
    )


class ScriptBook:
    """Every script's key count, SHA1 and source, by operation name, and the
    Function library that holds them all."""

    def __init__(self) -> None:
        self._by_name = {
            name: (src.numkeys, hashlib.sha1(src.source.encode()).hexdigest(), src.source)
            for name, src in sources().items()
        }
        self.library = library()
        self._functions = {name: self.library.function(name) for name in self._by_name}

    def _numkeys(self, call: Call) -> int:
        numkeys = self._by_name[call.script][0]
        if len(call.keys) != numkeys:
            raise ScriptError(f"{call.script} takes {numkeys} keys, got {len(call.keys)}")
        return numkeys

    def evalsha(self, call: Call) -> tuple[Any, ...]:
        """The ``EVALSHA`` command's words for ``call``; ``ScriptError`` if its
        key count is not the script's."""
        numkeys = self._numkeys(call)
        return ("EVALSHA", self._by_name[call.script][1], numkeys, *call.keys, *call.args)

    def fcall(self, call: Call) -> tuple[Any, ...]:
        """The ``FCALL`` command's words for ``call`` (keys as for ``EVALSHA``)."""
        numkeys = self._numkeys(call)
        return ("FCALL", self._functions[call.script], numkeys, *call.keys, *call.args)

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
        #: ``FCALL`` (True) until the server or the ACL refuses Functions.
        self.functions = client not in _WITHOUT_FUNCTIONS
        #: Whether the client knows which node serves which slot (:meth:`route`
        #: asks it): an async cluster client learns that on its first command.
        self.mapped = not isinstance(client, AsyncRedisCluster)

    async def io(self, sent: Any) -> Any:
        """What the client answered to a command just sent: ``sent`` itself for a
        sync client (an async runner awaits it)."""
        return sent

    def words(self, call: Call) -> tuple[Any, ...]:
        """The command that runs ``call``: ``FCALL``, or ``EVALSHA`` without Functions."""
        return self.book.fcall(call) if self.functions else self.book.evalsha(call)

    def route(self, call: Call) -> dict[str, Any]:
        """Where a cluster client sends ``call``: the node of its slot. (Left to
        itself, redis-py asks a node for the keys of an ``FCALL``, and of an
        ``EVALSHA`` in a pipeline, with ``COMMAND GETKEYS``: a round trip per
        call, to a node that may be down.)"""
        if not self.clustered:
            return {}
        return {"target_nodes": self.client.get_node_from_key(call.keys[0])}

    async def map_slots(self) -> None:
        """Have an async cluster client read the cluster's slots, once."""
        if not self.mapped:
            await self.client.initialize()
            self.mapped = True

    def send(self, call: Call) -> Any:
        """Send ``call`` (what the client answers, or for an async one, awaits)."""
        return self.client.execute_command(*self.words(call), **self.route(call))

    def fall_back(self) -> None:
        """Run scripts by ``EVALSHA`` from now on, on this client (the server or
        the ACL refused Functions: that does not change while it answers)."""
        self.functions = False
        _WITHOUT_FUNCTIONS.add(self.client)

    async def script(self, call: Call) -> Any:
        """Run ``call``'s script; its raw reply. A missing library or script is
        loaded where the call's keys live and the call sent again, by
        ``EVALSHA`` if Functions were refused; an error reply that names a
        corrupt key raises :class:`~django_emq.exceptions.CorruptKeyspace`."""
        await self.map_slots()
        try:
            try:
                return await self.io(self.send(call))
            except ResponseError as exc:
                if not await self.recover(exc, call):
                    raise
                return await self.io(self.send(call))
        except ResponseError as exc:
            mapped = script_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    async def recover(self, reply: Any, call: Call) -> bool:
        """Make ``call`` runnable after ``reply`` refused it: True once its code
        is loaded (falling back to ``EVALSHA`` if Functions were refused), False
        for any other error."""
        if not self.needs_code(reply):
            return False
        await self.load_code(call)
        return True

    def needs_code(self, reply: Any) -> bool:
        """``reply`` says its call did not run for want of code the server can be
        given: the library or script is missing, or Functions were refused (then
        every call on this client runs by ``EVALSHA`` from now on)."""
        if no_functions(reply):
            if self.functions:
                self.fall_back()
            return True
        return missing_code(reply)

    async def load_code(self, call: Call) -> None:
        """Load the library (or, without Functions, ``call``'s script) where
        ``call``'s keys live. A library another client loaded meanwhile is
        loaded: function names carry the library's hash, so it is this one."""
        if self.functions:
            try:
                await self.send_load(call, "FUNCTION LOAD", self.book.library.source)
                return
            except ResponseError as exc:
                if "already exists" in str(exc):
                    return
                if not no_functions(exc):
                    raise
                self.fall_back()
        await self.send_load(call, "SCRIPT LOAD", self.book.source(call))

    async def send_load(self, call: Call, command: str, source: str) -> None:
        """Send ``command source`` where ``call``'s keys live (on a cluster: that
        node alone, so a primary that is down elsewhere does not stop it)."""
        await self.io(self.client.execute_command(command, source, **self.route(call)))

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
        the server had no code for (after a flush or a restart; or it refused
        Functions: they did not run) are run again once it is loaded, in one
        more round trip."""
        replies = await self._pipelined(batch)
        missing = [i for i, reply in enumerate(replies) if self.needs_code(reply)]
        if missing:
            loaded: set[tuple[str, str]] = set()
            for i in missing:
                call = batch[i]
                where = (
                    "" if self.functions else call.script,
                    call.keys[0] if self.clustered else "",
                )
                if where not in loaded:
                    loaded.add(where)
                    await self.load_code(call)
            again = await self._pipelined([batch[i] for i in missing])
            for i, reply in zip(missing, again, strict=True):
                replies[i] = reply
        return [script_error(reply) if isinstance(reply, Exception) else reply for reply in replies]

    async def _pipelined(self, batch: Sequence[Call]) -> list[Any]:
        await self.map_slots()
        pipe = self.client.pipeline(transaction=False)
        for call in batch:
            pipe.execute_command(*self.words(call), **self.route(call))
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

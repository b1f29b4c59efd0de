"""The worker's async clients pack commands as redis-py's sync client does
(hiredis, in C): the same bytes on the wire, the same refusal of what a
command cannot carry, and the commands run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection

from django_emq.worker.client import HiredisPacking, async_client, packed_by_hiredis

#: Every kind of argument a call carries: text (not ASCII too), bytes, ints
#: (large too), floats, a bytearray and a memoryview.
ARGS: tuple[Any, ...] = ("key", "élan", b"\x00\xffraw", 7, 2**70, 1.5)
#: Commands named in one word (hiredis packs them as they are) and in two (split first).
COMMANDS: list[tuple[Any, ...]] = [
    ("FCALL", *ARGS),
    ("FUNCTION LOAD", *ARGS),
    (b"EVALSHA", *ARGS),
    ("SET", "k", bytearray(b"ab"), memoryview(b"cd")),
]


def made(client: Any) -> Any:
    """A new connection of ``client``'s pool (not connected)."""
    return client.connection_pool.make_connection()


@pytest.mark.parametrize("words", COMMANDS)
def test_the_worker_client_packs_as_the_sync_client_does(
    emq: redis.Redis, words: tuple[Any, ...]
) -> None:
    client = async_client(1.0, 1.0)
    connection = made(client)
    assert isinstance(connection, HiredisPacking)
    sync = made(emq)
    assert b"".join(connection.pack_command(*words)) == b"".join(sync.pack_command(*words))
    asyncio.run(client.aclose())


@pytest.mark.parametrize("bad", [None, True, [1], {"a": 1}])
def test_an_argument_a_command_cannot_carry_is_refused_as_by_the_sync_client(
    emq: redis.Redis, bad: object
) -> None:
    connection = made(async_client(1.0, 1.0))
    with pytest.raises(redis.DataError):
        made(emq).pack_command("SET", "k", bad)
    with pytest.raises(redis.DataError):
        connection.pack_command("SET", "k", bad)


def test_commands_and_pipelines_run_on_the_worker_client(emq: redis.Redis) -> None:
    async def run() -> tuple[Any, list[Any]]:
        client = async_client(1.0, 1.0)
        try:
            await client.set("k", "élan")
            pipe = client.pipeline(transaction=False)
            pipe.incrby("n", 2**40)
            pipe.get("k")
            return await client.get("k"), await pipe.execute()
        finally:
            await client.aclose()

    assert asyncio.run(run()) == ("élan".encode(), [2**40, "élan".encode()])


@pytest.mark.parametrize("base", [Connection, SSLConnection, UnixDomainSocketConnection])
def test_every_kind_of_connection_gets_the_packing_once(base: type[Connection]) -> None:
    packed = packed_by_hiredis(base)
    assert issubclass(packed, base)
    assert issubclass(packed, HiredisPacking)
    assert packed_by_hiredis(packed) is packed
    assert packed_by_hiredis(base) is packed

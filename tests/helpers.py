"""Helpers shared by the engine's behaviour tests: lanes, filling, reading and
dumping the real server's state, and counting round trips on a real connection."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import redis

from django_emq.engine.client import Client
from django_emq.engine.ids import lane_id
from django_emq.engine.queue import Claim, Queue

#: Any dotted path will do: the engine stores it, it never imports it.
TASK = "tests.tasks.noop"
#: A lease long enough never to expire during a test.
LONG_LEASE = 60_000


def lane(n: int, brand: str = "USR") -> str:
    """The lane of producer ``n``."""
    return lane_id(brand, n)


def fill(queue: Queue, lane: str, n: int, start: int = 0) -> list[str]:
    """Enqueue ``n`` jobs on ``lane`` (args ``[start]``, ``[start + 1]``, ...); their ids."""
    done = queue.enqueue_many(
        {"lane": lane, "task_path": TASK, "args": [start + i]} for i in range(n)
    )
    return [e.job_id for e in done]


def claim_one(queue: Queue, lease_ms: int = LONG_LEASE) -> Claim:
    """One turn of the ring that must serve exactly one job."""
    claimed = queue.claim(lease_ms)
    assert claimed is not None, "the ring was empty"
    assert len(claimed) == 1, f"expected one job, got {len(claimed)}"
    return claimed[0]


def claim_turn(queue: Queue, lease_ms: int = LONG_LEASE) -> list[Claim]:
    """One turn of the ring that must serve something."""
    claimed = queue.claim(lease_ms)
    assert claimed is not None, "the ring was empty"
    return claimed


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _texts(values: Any) -> list[str]:
    return [_text(v) for v in values]


def ring(r: Client, queue: Queue) -> list[str]:
    """The ring, head first."""
    return _texts(r.lrange(queue.keys.ring, 0, -1))


def on_ring(r: Client, queue: Queue) -> set[str]:
    """The on-ring membership set."""
    return set(_texts(r.smembers(queue.keys.on_ring)))


def pending(r: Client, queue: Queue, lane: str) -> list[str]:
    """A lane's pending job ids, oldest first."""
    return _texts(r.zrange(queue.keys.pending(lane), 0, -1))


def active(r: Client, queue: Queue) -> list[str]:
    """Claimed job ids, earliest deadline first."""
    return _texts(r.zrange(queue.keys.active, 0, -1))


def dump(r: Client) -> dict[str, tuple[str, Any, bool]]:
    """Every key of the database with its type and contents (TTLs as has-a-TTL)."""
    state: dict[str, tuple[str, Any, bool]] = {}
    for key in _texts(r.keys("*")):
        kind = _text(r.type(key))
        contents: Any
        if kind == "string":
            contents = r.get(key)
        elif kind == "list":
            contents = r.lrange(key, 0, -1)
        elif kind == "set":
            contents = sorted(_texts(r.smembers(key)))
        elif kind == "zset":
            contents = r.zrange(key, 0, -1, withscores=True)
        elif kind == "hash":
            contents = r.hgetall(key)
        else:
            raise AssertionError(f"unexpected key type {kind} for {key}")
        state[key] = (kind, contents, int(r.pttl(key)) > 0)
    return state


def plain(client: Client) -> redis.Redis:
    """``client``, asserted to be a single-server client (not a cluster client)."""
    assert isinstance(client, redis.Redis), f"{client!r} is not a single-server client"
    return client


def new_client(r: redis.Redis) -> redis.Redis:
    """Another client (its own connections) on ``r``'s server and database."""
    kwargs = r.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"], db=kwargs.get("db", 0))


def server_ms(r: Client) -> int:
    """The server clock in milliseconds (the clock leases and schedules use)."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def due_on_server(r: Client, ahead_ms: int = 500) -> tuple[datetime, int]:
    """A ``run_after`` ``ahead_ms`` past the server clock, and the same moment in
    ms: far enough ahead that a slow enqueue on a loaded machine still lands
    before it (a deferral timed on the client clock can pass before the enqueue
    reaches the server, and the job is then never scheduled)."""
    due_ms = server_ms(r) + ahead_ms
    return datetime.fromtimestamp(due_ms / 1000, UTC), due_ms


def sleep_past(r: Client, deadline_ms: int) -> None:
    """Sleep until the server clock is past ``deadline_ms``."""
    while server_ms(r) <= deadline_ms:
        time.sleep(0.01)


#: Ports this process has handed out, so two calls never return the same one.
_HANDED_OUT: set[int] = set()


def _ephemeral_floor() -> int:
    """The lowest port the kernel gives outgoing connections (32768 if unknown)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port free on the loopback right now, below the ephemeral range.

    A port the kernel picked for us (bind to 0) is an ephemeral one: between our
    check and the server binding it, any outgoing connection (a client of another
    node, say) may take it, and the server fails with "Address already in use".
    Ports below the ephemeral range are only ever taken by an explicit bind.
    """
    floor = _ephemeral_floor()
    low = max(1024, floor - 12_000)
    for _ in range(1000):
        port = random.randrange(low, floor)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise AssertionError(f"no free port found in {low}..{floor - 1}")


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll ``check`` until it holds; fail the test (a safety limit, not a timing
    assertion) if it never does."""
    give_up = time.monotonic() + timeout
    while not check():
        if time.monotonic() > give_up:
            raise AssertionError(f"{what} never held (gave up after {timeout:g}s)")
        time.sleep(0.01)


wait_until = wait_for


class CountingConnection(redis.Connection):
    """A real connection that counts the requests it sends (one per round trip)."""

    sent = 0

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sent += 1
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


@contextmanager
def counting_client(r: redis.Redis) -> Iterator[tuple[redis.Redis, type[CountingConnection]]]:
    """A client on ``r``'s server whose round trips are counted by the yielded class."""
    kwargs = dict(r.connection_pool.connection_kwargs)
    counter = type("RoundTripCounter", (CountingConnection,), {"sent": 0})
    pool = redis.ConnectionPool(connection_class=counter, **kwargs)
    client = redis.Redis(connection_pool=pool)
    try:
        yield client, counter
    finally:
        client.close()
        pool.disconnect()

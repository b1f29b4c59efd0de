"""Tasks the integration tests enqueue. Each records its runs in Valkey."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from django.tasks import TaskContext, task

from django_emq.connection import get_connection

RUNS = "test:runs"


def _record(label: str) -> None:
    get_connection().rpush(RUNS, label)


@task
def record(label: str) -> str:
    """Append ``label`` to the runs list; returns it."""
    _record(label)
    return label


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def slow(label: str, seconds: float) -> str:
    """Record the start, sleep, record the end."""
    _record(f"start:{label}")
    time.sleep(seconds)
    _record(f"end:{label}")
    return label


@task
def gate(label: str, key: str) -> str:
    """Record the start, wait until ``key`` exists in Valkey (at most 30 s), record the end."""
    _record(f"start:{label}")
    give_up = time.monotonic() + 30
    while not get_connection().exists(key) and time.monotonic() < give_up:
        time.sleep(0.01)
    _record(f"end:{label}")
    return label


@task
def boom(label: str) -> None:
    _record(label)
    raise RuntimeError(f"boom {label}")


@task
def exits() -> None:
    raise SystemExit(3)


@task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    _record(f"async:{a + b}")
    return a + b


@task(takes_context=True)
def attempt_number(context: TaskContext[Any, Any]) -> int:
    return context.attempt


@task(takes_context=True)
def attempted_at(context: TaskContext[Any, Any]) -> str:
    """The attempt's time as the task sees it (its TaskResult's ``last_attempted_at``)."""
    at = context.task_result.last_attempted_at
    return "" if at is None else at.isoformat()


@task
def unserialisable_result() -> Any:
    return object()


@task(takes_context=True)
def cooperative(context: TaskContext[Any, Any]) -> str:
    """Report progress, then wait (at most 30 s) until a cancel is asked; say so."""
    from django_emq import cancel_requested, report_progress

    report_progress(context, 0.5, "halfway")
    _record("start:cooperative")
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        if cancel_requested(context):
            return "stopped"
        time.sleep(0.02)
    return "never asked"


@task(takes_context=True)
def cooperative_raises(context: TaskContext[Any, Any]) -> str:
    """Wait (at most 30 s) until a cancel is asked, then end failed with
    ``JobCancelled`` (the way the docs show for a sync task)."""
    from django_emq import cancel_requested
    from django_emq.exceptions import JobCancelled

    _record("start:cooperative_raises")
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        if cancel_requested(context):
            raise JobCancelled(context.task_result.id, "stopped when asked")
        time.sleep(0.02)
    return "never asked"


@task
def surrogate() -> str:
    """Returns text with a lone surrogate: Python holds it, UTF-8 (and Valkey) cannot."""
    text: str = json.loads('"\\ud800"')
    return text


@task
def not_a_number() -> float:
    return float("nan")


@task
def huge(size: int) -> str:
    return "x" * size


@task
def deep(depth: int) -> list[Any]:
    nested: list[Any] = []
    for _ in range(depth):
        nested = [nested]
    return nested


@task
async def async_nap(label: str, seconds: float) -> str:
    """Count this run in flight (``test:inflight``), keep the highest count seen
    (``test:peak``), sleep ``seconds`` on the loop, record ``label``."""
    client = get_connection()
    client.eval(PEAK_LUA, 2, "test:inflight", "test:peak")
    await asyncio.sleep(seconds)
    client.decr("test:inflight")
    _record(label)
    return label


#: INCR the in-flight count and keep the peak, in one atomic call.
PEAK_LUA = """
local n = redis.call('INCR', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n
"""


@task(takes_context=True)
async def async_cooperative(context: TaskContext[Any, Any]) -> str:
    """Record the start, then wait (at most 30 s): the worker cancels it when asked."""
    _record("start:async_cooperative")
    await asyncio.sleep(30)
    return "never asked"

"""Tasks the integration tests enqueue. Each records its runs in Valkey."""

from __future__ import annotations

import asyncio
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

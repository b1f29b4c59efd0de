"""Tasks the fault tests enqueue. They write nothing to Valkey: each run of a job
is recorded as one line appended to a file of the worker process that ran it,
so the record survives the server and the worker being killed, and a task can
run under an ACL user allowed only ``emq:*`` keys.

The folder is named by the ``EMQ_TEST_RUNS`` environment variable; a line is
``<label> <pid> <attempt>``. Appends of one short line with ``O_APPEND`` are
atomic, so threads and processes never interleave inside a line.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.tasks import TaskContext, task

RUNS_ENV = "EMQ_TEST_RUNS"


def _record(label: str, attempt: int) -> None:
    folder = os.environ.get(RUNS_ENV)
    if not folder:
        raise RuntimeError(f"{RUNS_ENV} is not set: the fault tests' tasks need a runs folder")
    line = f"{label} {os.getpid()} {attempt}\n".encode()
    fd = os.open(Path(folder) / f"runs-{os.getpid()}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@task(takes_context=True)
def tick(context: TaskContext[Any, Any], label: str) -> str:
    """Record this run; returns ``label:attempt`` (so the standing result names its attempt)."""
    _record(label, context.attempt)
    return f"{label}:{context.attempt}"


@task(takes_context=True)
def hold_first(context: TaskContext[Any, Any], label: str, seconds: float) -> str:
    """Record this run; the first attempt then takes ``seconds``, later ones none."""
    _record(label, context.attempt)
    if context.attempt == 1:
        time.sleep(seconds)
    return f"{label}:{context.attempt}:{os.getpid()}"


@task(takes_context=True)
def nap(context: TaskContext[Any, Any], label: str, seconds: float) -> str:
    """Record this run, then take ``seconds``."""
    _record(label, context.attempt)
    time.sleep(seconds)
    return label


@task(takes_context=True)
def kills_its_worker(context: TaskContext[Any, Any], label: str) -> None:
    """Record this run, then SIGKILL the worker process running it (a poison job:
    a segfaulting extension, an out-of-memory kill)."""
    _record(label, context.attempt)
    os.kill(os.getpid(), signal.SIGKILL)


@task(takes_context=True)
async def awaits_file(context: TaskContext[Any, Any], label: str, path: str) -> str:
    """A coroutine task: record this run, wait (on the loop) until ``path``
    exists, then record ``<label>-end``."""
    _record(label, context.attempt)
    while not os.path.exists(path):
        await asyncio.sleep(0.02)
    _record(f"{label}-end", context.attempt)
    return label


@task(takes_context=True)
async def blocks_the_loop(context: TaskContext[Any, Any], label: str, seconds: float) -> str:
    """A coroutine task that wrongly blocks the event loop for ``seconds``."""
    _record(label, context.attempt)
    time.sleep(seconds)  # the mistake the watchdog is for
    return label


@task(takes_context=True)
async def swallows_cancel(context: TaskContext[Any, Any], label: str) -> None:
    """A coroutine task that never returns and swallows every cancel."""
    _record(label, context.attempt)
    while True:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            continue


@task(takes_context=True)
async def breaks_its_worker(context: TaskContext[Any, Any], label: str) -> None:
    """Record this run, break the worker running it (its next beat raises
    ``SystemExit``: one of the worker's duties fails, and the worker stops),
    then never return."""
    from django_emq.worker.beat import Beat

    _record(label, context.attempt)

    async def broken(self: Beat, held: Any) -> None:
        raise SystemExit("a job broke the worker running it")

    Beat.__call__ = broken  # type: ignore[method-assign]
    await asyncio.sleep(3600)


@task(takes_context=True)
async def stops_the_loop(context: TaskContext[Any, Any], label: str) -> str:
    """A coroutine task that stops the event loop running it, then goes on."""
    _record(label, context.attempt)
    asyncio.get_running_loop().stop()
    await asyncio.sleep(0.01)
    return label


@task
def interrupts() -> None:
    raise KeyboardInterrupt


@task
def exits() -> None:
    raise SystemExit(3)


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(text: str) -> int:
    return len(text)


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a job, as its task recorded it."""

    label: str
    pid: int
    attempt: int


def read_runs(folder: Path) -> dict[str, list[Run]]:
    """Every recorded run, by label, in attempt order."""
    runs: dict[str, list[Run]] = defaultdict(list)
    for path in sorted(folder.glob("runs-*.log")):
        for line in path.read_text().splitlines():
            label, pid, attempt = line.split()
            runs[label].append(Run(label, int(pid), int(attempt)))
    for label in runs:
        runs[label].sort(key=lambda run: run.attempt)
    return dict(runs)

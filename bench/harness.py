"""What ``bench/run.py`` and the sections kept in modules of their own
(``bench/io.py``) share: the harness a section runs on, the progress line and
the report's Markdown helpers.

A section imports this module and never ``bench/run.py``, which imports the
sections, so the two never import each other (``tests/test_imports.py``).
``bench.run.Bench`` is the one harness; ``Harness`` names the part of it a
section may use.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import redis

    from bench.peers.procs import WorkerProcess
    from django_emq.engine import Queue


class Harness(Protocol):
    """One benchmark run as a section sees it: the server, the queue, the
    worker processes it starts and the peers' driver."""

    #: An admin client of the run's server (no socket timeout).
    client: redis.Redis
    #: The engine queue the run measures.
    queue: Queue
    #: Where the worker and driver logs go.
    logs: Path
    #: Whether the peer queues (arq, Dramatiq, Celery, ...) run too.
    peers: bool

    def worker(self, name: str, *options: str, settings: str = "bench.settings") -> WorkerProcess:
        """A ``run_emq_worker`` process with ``options``, logging to ``name``.log."""
        ...

    def job_span(self, ids: Sequence[str]) -> tuple[int, int, int]:
        """(first claim ms, last completion ms, jobs done) from the job rows."""
        ...

    def discard(self, *logs: Path) -> None:
        """Drop the logs of runs that went well."""
        ...

    def driver(self, *args: str, timeout: float = ...) -> dict[str, Any]:
        """One run of a peer queue through ``bench/peers/driver.py``; its JSON line."""
        ...


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- report ---------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> str:
    align = align or "l" + "r" * (len(headers) - 1)
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def n0(value: object) -> str:
    return "—" if value is None else f"{float(str(value)):,.0f}"


def n1(value: object) -> str:
    return "—" if value is None else f"{float(str(value)):,.1f}"

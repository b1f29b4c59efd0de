"""RQ's jobs: plain functions, enqueued by import path."""

from __future__ import annotations

from bench.peers import common


def noop(n: int = 0) -> None:
    """Does nothing."""


def mark(name: str) -> None:
    common.mark(name)


def timed(label: str, ms: float) -> None:
    common.timed(label, ms)

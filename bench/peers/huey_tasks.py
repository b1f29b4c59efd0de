"""Huey's tasks on a RedisHuey (our Valkey), defaults otherwise."""

from __future__ import annotations

from huey import RedisHuey

from bench.peers import common

huey = RedisHuey("bench", url=common.url())


@huey.task()
def noop(n: int = 0) -> None:
    """Does nothing."""


@huey.task()
def mark(name: str) -> None:
    common.mark(name)


@huey.task()
def incr(total: int) -> None:
    """One ``INCR`` (``common.incr``: the same body as ``bench.tasks.incr``)."""
    common.incr(common.client(), total)

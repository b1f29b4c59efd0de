"""Measuring a flood: waits per player, and what one FIFO line would have given.

Pure functions over measured jobs, so the arithmetic can be read (and tested)
apart from the command that drives the flood.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Job:
    """One measured job, times in seconds on the server's clock."""

    player: str
    enqueued: float
    started: float
    finished: float

    @property
    def wait(self) -> float:
        return self.started - self.enqueued

    @property
    def service(self) -> float:
        return max(0.0, self.finished - self.started)


@dataclass(frozen=True, slots=True)
class Row:
    """One player's line of the table, for one discipline."""

    player: str
    jobs: int
    median: float
    worst: float
    #: Position of the player's last job among every job's start (1-based).
    last_start: int


def max_overlap(jobs: Sequence[Job]) -> int:
    """The most jobs seen running at once (at least 1): the parallelism the worker had."""
    events = sorted([(j.started, 1) for j in jobs] + [(j.finished, -1) for j in jobs])
    running = most = 0
    for _, step in events:  # at equal times a finish (-1) sorts before a start
        running += step
        most = max(most, running)
    return max(1, most)


def simulate_fifo(jobs: Sequence[Job], slots: int) -> list[Job]:
    """The same arrivals served by one shared first-in-first-out line.

    ``slots`` workers, free from the moment the real ones started their first
    job, serve ``jobs`` in their order (enqueue order), each taking its
    measured service time. Returns the jobs with their simulated start and
    finish.
    """
    opening = min((j.started for j in jobs), default=0.0)
    free: list[float] = [opening] * max(1, slots)
    served = []
    for job in jobs:
        start = max(job.enqueued, heapq.heappop(free))
        finish = start + job.service
        heapq.heappush(free, finish)
        served.append(Job(job.player, job.enqueued, start, finish))
    return served


def rows(jobs: Sequence[Job], players: Sequence[str]) -> list[Row]:
    """One row per player (in ``players`` order) from served ``jobs``."""
    order = sorted(range(len(jobs)), key=lambda i: (jobs[i].started, i))
    position = {index: rank for rank, index in enumerate(order, start=1)}
    table = []
    for player in players:
        mine = [i for i, j in enumerate(jobs) if j.player == player]
        if not mine:
            continue
        waits = [jobs[i].wait for i in mine]
        table.append(
            Row(
                player=player,
                jobs=len(mine),
                median=statistics.median(waits),
                worst=max(waits),
                last_start=max(position[i] for i in mine),
            )
        )
    return table


def duration(seconds: float) -> str:
    """``0.0123`` -> ``"12 ms"``, ``2.468`` -> ``"2.47 s"``."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.2f} s"


def table(fair: Sequence[Row], fifo: Sequence[Row], total: int) -> list[str]:
    """The printed table: one line per player, fair lanes beside one FIFO line."""
    width = max([len("player")] + [len(r.player) for r in fair])
    head = (
        f"{'':<{width}}       | {'fair lanes (measured)':^31} | {'one FIFO line (simulated)':^31}"
    )
    cols = f"{'median':>8} {'worst':>8} {'last start':>13}"
    lines = [head.rstrip(), f"{'player':<{width}} {'jobs':>5} | {cols} | {cols}"]
    lines.append("-" * len(lines[1]))
    by_player = {r.player: r for r in fifo}
    for row in fair:
        other = by_player[row.player]
        cells = [
            f"{duration(r.median):>8} {duration(r.worst):>8} {f'{r.last_start} of {total}':>13}"
            for r in (row, other)
        ]
        lines.append(f"{row.player:<{width}} {row.jobs:>5} | {cells[0]} | {cells[1]}")
    return lines

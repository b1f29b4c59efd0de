"""How far a worker claims ahead: its own concern, apart from holding jobs.

A worker of ``concurrency`` N claims short jobs ahead so its slots do not run
dry while the next claim is on its way: as many as the N slots run in about
:data:`BATCH_TARGET`, at most ``prefetch`` - 1, and none before the first job
ran or once jobs take that long (a claim then asks for exactly the free slots).
"""

from __future__ import annotations

#: Jobs are claimed ahead while the ones run take less than this on average.
BATCH_TARGET = 0.01


class Window:
    """The claim-ahead window, learnt from the jobs' run times."""

    def __init__(self, concurrency: int, prefetch: int) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        #: The jobs' average run time so far (seconds; ``None`` before the first).
        self.average: float | None = None

    def learn(self, duration: float) -> None:
        """One more job's run time into the average (a moving one, recent jobs weigh most)."""
        last = self.average
        self.average = duration if last is None else 0.8 * last + 0.2 * duration

    def size(self) -> int:
        """How many jobs to claim ahead (worked out once per claim, not per job)."""
        if self.average is None:
            return 0
        runs = self.concurrency * BATCH_TARGET / max(self.average, 1e-5)
        return min(self.prefetch - 1, int(runs))

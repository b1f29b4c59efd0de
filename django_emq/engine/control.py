"""Lane control, dead jobs and the beat's upkeep (reap, promote): the writes
on one queue that are not a job's own path, each one script (the looping ones
in batches, so a deep lane never blocks the server)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from . import calls
from .exceptions import check_code
from .ids import validate_job_id, validate_lane
from .keys import QueueKeys
from .payload import text
from .records import MAX_WEIGHT, positive_int

#: Batch size of the looping maintenance calls (reap, promote, drain, dead jobs).
BATCH = 500


class LaneControl:
    """Pause, resume, ceilings, weights, drain, move, and dead jobs, for ``Queue``."""

    keys: QueueKeys
    max_expiries: int
    history: int

    def _run(self, call: calls.Call, client: Any = None) -> Any:
        raise NotImplementedError

    # -- the beat's upkeep ----------------------------------------------------

    def reap(self) -> list[str]:
        """Return every job whose lease expired to its lane; returns their ids.

        A job whose lease has expired as many times as its max attempts (its
        worker died or froze every time) is dead instead, with a
        ``LeaseExpired`` error: a poison job does not come back forever."""
        reaped: list[str] = []
        while True:
            batch = [
                text(i)
                for i in self._run(calls.reap(self.keys, BATCH, self.max_expiries, self.history))
            ]
            reaped += batch
            if len(batch) < BATCH:
                return reaped

    def promote(self) -> tuple[int, int | None]:
        """Move every due scheduled job into its lane, and put every rate-limited
        lane whose next slot is due back on the ring.

        Returns ``(promoted, next_due_ms)``; ``next_due_ms`` (a job's due time
        or a throttled lane's next slot) is ``None`` when nothing else is due.
        """
        total = 0
        while True:
            count, next_due, lanes = self._run(calls.promote(self.keys, BATCH))
            total += int(count)
            if int(count) < BATCH and int(lanes) < BATCH:
                return total, (None if int(next_due) < 0 else int(next_due))

    # -- lane control -------------------------------------------------------

    def pause(self, lane: str) -> bool:
        """Take the lane off the ring; returns False if it was paused already."""
        return bool(self._run(calls.pause(self.keys, validate_lane(lane), True)))

    def resume(self, lane: str) -> bool:
        """Put a paused lane back; returns False if it was not paused."""
        return bool(self._run(calls.pause(self.keys, validate_lane(lane), False)))

    def set_limit(self, lane: str, ceiling: int | None) -> None:
        """Set the lane's concurrency ceiling (``None`` removes it)."""
        if ceiling is not None:
            positive_int("ceiling", ceiling)
        self._run(calls.set_limit(self.keys, validate_lane(lane), ceiling))

    def set_weight(self, lane: str, weight: int) -> None:
        """Serve up to ``weight`` of the lane's jobs per turn (1 is the default)."""
        positive_int("weight", weight, MAX_WEIGHT)
        self._run(calls.set_weight(self.keys, validate_lane(lane), weight))

    def drain(self, lane: str) -> int:
        """Delete the lane's pending jobs; keeps its settings and in-flight jobs.
        Works in batches, so a deep lane never blocks the server; returns the count."""
        validate_lane(lane)
        total = 0
        while True:
            deleted, remaining = self._run(calls.drain(self.keys, lane, BATCH))
            total += int(deleted)
            if int(remaining) == 0 or int(deleted) == 0:
                return total

    def move(self, job_id: str, lane: str) -> bool:
        """Move a pending or scheduled job to ``lane``, keeping its mint place.
        Returns False if it was in that lane already."""
        validate_job_id(job_id)
        reply = self._run(calls.move(self.keys, job_id, validate_lane(lane)))
        check_code(reply, job_id)
        return bool(reply)

    # -- dead jobs ----------------------------------------------------------

    def retry_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        """Send dead jobs back to their lanes at their mint place, failures reset.

        ``job_ids`` names them (only those of ``lane`` when a lane is given);
        ``job_ids=None`` with a lane takes every dead job of the lane. Ids that
        are not dead jobs are skipped. Returns how many were retried.
        """
        return self._dead(calls.retry_dead, job_ids, lane)

    def delete_dead(self, job_ids: Iterable[str] | None = None, *, lane: str | None = None) -> int:
        """Delete dead jobs, rows included; chosen as ``retry_dead`` chooses them.
        Returns how many were deleted."""
        return self._dead(calls.delete_dead, job_ids, lane)

    def _dead(
        self,
        build: Callable[[QueueKeys, str, int, list[str]], calls.Call],
        job_ids: Iterable[str] | None,
        lane: str | None,
    ) -> int:
        lane_arg = "" if lane is None else validate_lane(lane)
        total = 0
        if job_ids is None:
            if lane is None:
                raise ValueError("name the dead jobs: give job ids, a lane, or both")
            while True:  # batches, so a lane with many dead jobs never blocks the server
                done, remaining = self._run(build(self.keys, lane_arg, BATCH, []))
                total += int(done)
                if int(remaining) == 0 or int(done) == 0:
                    return total
        ids = [validate_job_id(job_id) for job_id in job_ids]
        for i in range(0, len(ids), BATCH):
            done, _ = self._run(build(self.keys, lane_arg, BATCH, ids[i : i + BATCH]))
            total += int(done)
        return total

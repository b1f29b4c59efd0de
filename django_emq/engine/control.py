"""Lane control, dead jobs, running a scheduled job now and the beat's upkeep
(reap, promote): the writes on one queue that are not a job's own path nor a
lane policy's (``.policies``), each one script (the looping ones in batches,
so a deep lane never blocks the server)."""

from __future__ import annotations

from collections.abc import Iterable

from . import calls, ops
from .ids import id_list, validate_job_id, validate_lane
from .keys import QueueKeys
from .ops import BATCH, DeadCall
from .runner import SyncRunner

__all__ = ["BATCH", "LaneControl"]


class LaneControl:
    """Pause, resume, drain, move, run now, and dead jobs, for ``Queue``: each an
    operation of :mod:`.ops` on the queue's runner."""

    keys: QueueKeys
    max_expiries: int
    history: int
    result_ttl_ms: int
    rate: tuple[int, int] | None
    fairness: str
    runner: SyncRunner

    # -- the beat's upkeep ----------------------------------------------------

    def reap(self) -> list[str]:
        """Return every job whose lease expired to its lane; returns their ids.

        A job whose lease has expired as many times as its max attempts (its
        worker died or froze every time) is dead instead, with a
        ``LeaseExpired`` error: a poison job does not come back forever."""
        return [job_id for batch in self.runner.run_all(ops.reap(self)) for job_id in batch]

    def promote(self) -> tuple[int, int | None]:
        """Move every due scheduled job into its lane, and put every rate-limited
        lane whose next slot is due back on the ring.

        Returns ``(promoted, next_due_ms)``; ``next_due_ms`` (a job's due time
        or a throttled lane's next slot) is ``None`` when nothing else is due.
        """
        return ops.promoted(self.runner.run_all(ops.promote(self)))

    def run_now(self, job_id: str) -> None:
        """Make a scheduled job (deferred, or backing off) due now and move every
        due job into its lane. ``InvalidJobState`` for a job that is not scheduled."""
        validate_job_id(job_id)
        self.runner.run(ops.due_now(self, job_id))
        self.promote()

    # -- lane control -------------------------------------------------------

    def pause(self, lane: str) -> bool:
        """Take the lane off the ring; returns False if it was paused already."""
        return self.runner.run(ops.pause(self, validate_lane(lane), True))

    def resume(self, lane: str) -> bool:
        """Put a paused lane back; returns False if it was not paused."""
        return self.runner.run(ops.pause(self, validate_lane(lane), False))

    def drain(self, lane: str) -> int:
        """Delete the lane's pending jobs; keeps its settings and in-flight jobs.
        Works in batches, so a deep lane never blocks the server; returns the count."""
        batches = self.runner.run_all(ops.drain(self, validate_lane(lane)))
        return sum(deleted for deleted, _ in batches)

    def move(self, job_id: str, lane: str) -> bool:
        """Move a pending or scheduled job to ``lane``, keeping its mint place.
        Returns False if it was in that lane already."""
        validate_job_id(job_id)
        return self.runner.run(ops.move(self, job_id, validate_lane(lane)))

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

    def _dead(self, build: DeadCall, job_ids: Iterable[str] | None, lane: str | None) -> int:
        lane_arg = "" if lane is None else validate_lane(lane)
        if job_ids is None:
            if lane is None:
                raise ValueError("name the dead jobs: give job ids, a lane, or both")
            # batches, so a lane with many dead jobs never blocks the server
            return sum(done for done, _ in self.runner.run_all(ops.dead(self, build, lane_arg, [])))
        ids = [validate_job_id(job_id) for job_id in id_list("job_ids", job_ids)]
        total = 0
        for i in range(0, len(ids), BATCH):
            done, _ = self.runner.run(ops.dead(self, build, lane_arg, ids[i : i + BATCH]))
            total += done
        return total

"""Cancelling a job (``docs/django.md``): a pending or scheduled job is
cancelled at once and never runs; a running one is asked to stop (a
``cancel`` field on its row that its task reads). Each call is one script (or
one read) on the job's own keys, O(1) in the number of lanes; nothing on the
hot path reads it.
"""

from __future__ import annotations

import json

from .. import ops
from ..ids import validate_job_id
from .base import Policy, Routed

#: The error a cancelled job is left with (django.tasks' TaskError fields).
CANCELLED_ERROR = json.dumps(
    {
        "exception_class_path": "django_emq.exceptions.JobCancelled",
        "traceback": "django_emq.exceptions.JobCancelled: cancelled before it ran",
    }
)

POLICY = Policy(name="cancel", doc="django.md#cancelling-and-progress", lua=("cancel-5.lua",))


class Calls(Routed):
    """``cancel`` and ``cancel_requested``, for ``Queue`` and ``ShardedQueue``."""

    def cancel(self, job_id: str) -> str:
        """Cancel job ``job_id``.

        A pending or scheduled job never runs: it is ``cancelled`` at once
        (answers ``"cancelled"``) and reads back as a failed result whose error
        is ``django_emq.exceptions.JobCancelled``. A running job is asked to
        stop (answers ``"requested"``): its task sees
        ``django_emq.cancel_requested`` turn true and stops at a point of
        its own choosing. Raises ``JobNotFound`` for no such job and
        ``InvalidJobState`` for one that has finished (nothing changes then).
        """
        home = self.shard_for_job(validate_job_id(job_id))
        return home.runner.run(ops.cancel(home, job_id, CANCELLED_ERROR))

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel was asked for job ``job_id`` (one read)."""
        home = self.shard_for_job(validate_job_id(job_id))
        return bool(home.connection.hexists(home.keys.job(job_id), "cancel"))

"""The worker's log lines: one record per job, built only when it is emitted.

``run_emq_worker`` logs to the ``django_emq.worker`` logger: a line per job at
INFO (``lane``, ``job``, ``task``, ``attempt``, ``duration``, ``outcome``
last; a retry or a dead job names its ``error`` too, at WARNING or ERROR), a summary
every minute. Django's own per-job lines (``django.tasks``: started and
finished, from its task signals' receivers) stay connected (Django's task
contract, tested in ``tests/contract``); ``run_emq_worker`` shows them from
``-v 2`` on when the project's ``LOGGING`` leaves output to it.
"""

from __future__ import annotations

import logging

from .jobs import Job

logger = logging.getLogger("django_emq.worker")

#: Level of a job's line for each outcome.
LEVELS = {
    "done": logging.INFO,
    "retry": logging.WARNING,
    "dead": logging.ERROR,
    "stale": logging.WARNING,
    "released": logging.INFO,
    "dropped": logging.WARNING,
}


def job_line(job: Job, outcome: str, reason: str | None = None) -> None:
    """Log ``job``'s one line (nothing is formatted unless the level is on)."""
    level = LEVELS.get(outcome, logging.INFO)
    if not logger.isEnabledFor(level):
        return
    c = job.claim
    if reason is None:
        logger.log(
            level,
            "lane=%s job=%s task=%s attempt=%d duration=%.3fs outcome=%s",
            c.lane, c.job_id, c.task_path, c.token, job.duration, outcome,
        )  # fmt: skip
    else:
        logger.log(
            level,
            "lane=%s job=%s task=%s attempt=%d duration=%.3fs error=%s outcome=%s",
            c.lane, c.job_id, c.task_path, c.token, job.duration, reason, outcome,
        )  # fmt: skip

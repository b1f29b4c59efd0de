"""The worker's log lines: one record per job, built only when it is emitted.

``run_emq_worker`` logs to the ``django_emq.worker`` logger: a line per job at
INFO (``lane``, ``job``, ``task``, ``attempt``, ``duration``, ``outcome``
last; a retry or a dead job names its ``error`` too, at WARNING or ERROR), a summary
every minute. Django's own per-job lines (``django.tasks``: started and
finished, from its task signals' receivers) say the same again, so the worker
leaves them out while it runs (:func:`quiet_django_task_lines`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from django.tasks import signals

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


@contextlib.contextmanager
def quiet_django_task_lines() -> Iterator[None]:
    """Disconnect Django's logging receivers of ``task_started``/``task_finished``
    while the worker runs (its own line per job says it all), and connect them
    again after."""
    pairs = [
        (signals.task_started, signals.log_task_started),
        (signals.task_finished, signals.log_task_finished),
    ]
    dropped = [(signal, receiver) for signal, receiver in pairs if signal.disconnect(receiver)]
    try:
        yield
    finally:
        for signal, receiver in dropped:
            signal.connect(receiver)

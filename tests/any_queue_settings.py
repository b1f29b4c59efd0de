"""Settings of the worker processes ``tests/test_any_queue.py`` starts: the
test settings, plus a backend ``anyq`` with ``QUEUES: []`` (Django's "any
queue name") and a one-second beat, so the worker re-reads the queue registry
each second."""

from typing import Any

from tests.settings import *  # noqa: F403
from tests.settings import TASKS

ANYQ: dict[str, Any] = {
    "BACKEND": "django_emq.backend.FairLanesBackend",
    "QUEUES": [],
    "OPTIONS": {"BEAT": 1},
}
TASKS = {**TASKS, "anyq": ANYQ}

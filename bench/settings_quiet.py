"""``bench.settings`` with the per-job INFO log lines off: Django's ``django.tasks``
receivers (task started / finished) and the worker's own line per job. Used by
one informational throughput row, to show what those lines cost."""

from __future__ import annotations

from bench.settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {
        "django.tasks": {"level": "WARNING"},
        "django_emq.worker": {"level": "WARNING"},
    },
}

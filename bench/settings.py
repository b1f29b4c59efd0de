"""Django settings of the benchmark's worker processes (``bench.settings``).

A plain production-like project: ``DEBUG`` off, one SQLite database (never
touched by the no-op tasks, but there, so the worker's per-job
``close_old_connections`` sees the connection handler a real site has),
one ``FairLanesBackend``. The server comes from ``$EMQ_URL``, set by
``bench/run.py`` to the Valkey it started.
"""

from __future__ import annotations

SECRET_KEY = "bench-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_emq",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# The URL comes from the EMQ_URL environment variable.
EMQ: dict[str, object] = {}
TASKS = {
    "default": {
        "BACKEND": "django_emq.backend.FairLanesBackend",
        "QUEUES": ["default"],
    }
}

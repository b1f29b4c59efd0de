"""Settings of the worker processes ``tests/test_worker_backend_options.py``
starts: the test settings, plus a backend ``tuned`` (queue ``tuned``) whose
``OPTIONS`` are read from the ``EMQ_TEST_OPTIONS`` environment variable (a
JSON object), so each test gives its worker's backend options of its own."""

import json
import os

from tests.settings import *  # noqa: F403
from tests.settings import TASKS

TUNED = {
    "BACKEND": "django_emq.backend.FairLanesBackend",
    "QUEUES": ["tuned"],
    "OPTIONS": json.loads(os.environ.get("EMQ_TEST_OPTIONS", "{}")),
}
TASKS = {**TASKS, "tuned": TUNED}

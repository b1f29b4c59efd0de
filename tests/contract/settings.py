"""Settings of the worker processes the contract tests start: the test settings,
with the contract's backend (two queues, as the reference suites configure) and
one attempt per job (Django's backends do not retry a failed task)."""

from tests.settings import *  # noqa: F403
from tests.settings import EMQ as BASE_EMQ

TASKS = {
    "default": {
        "BACKEND": "django_emq.backend.FairLanesBackend",
        "QUEUES": ["default", "queue-1"],
    },
    # A second backend of the same class, on queues of its own.
    "other": {
        "BACKEND": "django_emq.backend.FairLanesBackend",
        "QUEUES": ["other"],
    },
    "dummy": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"},
}
EMQ = {**BASE_EMQ, "MAX_ATTEMPTS": 1}

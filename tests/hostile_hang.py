"""A task module whose import hangs (tests/test_watchdog.py): the import runs
on the worker's event loop, so it blocks the loop as a coroutine that calls
``time.sleep`` would."""

import time

from django.tasks import task

time.sleep(3600)


@task
def job() -> None:
    """Never reached: the import above never ends."""

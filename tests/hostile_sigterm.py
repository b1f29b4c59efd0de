"""Tasks that send their own worker SIGTERM (tests/test_hostile_exits.py): a
worker stopping because a job told it to must not hand that job back as if
someone else had stopped it, or the job would stop every worker it meets, for
ever."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from django.tasks import TaskContext, task

from tests.chaos_tasks import _record


@task(takes_context=True)
def terminates_its_worker(context: TaskContext[Any, Any], label: str) -> str:
    """Record this run, SIGTERM the worker running it, and return."""
    _record(label, context.attempt)
    os.kill(os.getpid(), signal.SIGTERM)
    return f"{label}:{context.attempt}"


@task(takes_context=True)
def terminates_its_worker_and_stays(context: TaskContext[Any, Any], label: str) -> None:
    """Record this run, SIGTERM the worker running it, then outlive its grace."""
    _record(label, context.attempt)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(3600)

"""The tasks the contract tests enqueue: the same behaviours as the task modules
of Django's ``tests/tasks`` and of the django-tasks reference backends (a task
that does nothing, one that returns 42, ones that fail in each way a task can).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.tasks import TaskContext, task

from django_emq.connection import get_connection

#: The list the long tasks push their name to as they start (plumbing: the
#: process tests signal a worker only once its job has started).
STARTED = "contract:started"


def _started(name: str) -> None:
    get_connection().rpush(STARTED, name)


@task
def noop_task(*args: Any, **kwargs: Any) -> None:
    return None


@task
async def noop_task_async(*args: Any, **kwargs: Any) -> None:
    return None


@task
def calculate_meaning_of_life() -> int:
    return 42


@task
def failing_task_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task
def failing_task_system_exit() -> None:
    raise SystemExit("This task failed due to SystemExit")


@task
def failing_task_keyboard_interrupt() -> None:
    raise KeyboardInterrupt("This task failed due to KeyboardInterrupt")


@task
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task
def complex_return_value() -> Any:
    # Neither JSON nor pickle can hold it.
    return lambda: True


@task
def exit_task() -> None:
    sys.exit(1)


@task
def hang() -> None:
    """Do nothing for five minutes (a worker signalled mid-job)."""
    _started("hang")
    time.sleep(300)


@task
def sleep_for(seconds: float) -> None:
    _started("sleep_for")
    time.sleep(seconds)


@task(takes_context=True)
def get_task_id(context: TaskContext[Any, Any]) -> str:
    return context.task_result.id


@task(takes_context=True)
def check_context(context: TaskContext[Any, Any], attempt: int) -> None:
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt


def not_a_task(*args: Any) -> None:
    """A plain function: a job row naming it does not point to a Task."""

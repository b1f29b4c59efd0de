"""The backend half of the task contract: what ``enqueue`` answers, what
``get_result`` reads back, and what is refused.

Each test carries the name and the assertions of a test in Django's
``tests/tasks/test_tasks.py`` or in the ``tests/tests.py`` of the django-tasks
reference backends (django-tasks-db, django-tasks-rq); only the plumbing is
ours (the settings, the lane every enqueue rides, round trips counted where
they count queries). Where django-emq differs on purpose, the test keeps the
reference's name, asserts what we do instead and says why; docs/compatibility.md
lists every such difference.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import django
import pytest
import redis
from asgiref.sync import async_to_sync
from django.core.exceptions import SuspiciousOperation
from django.tasks import (
    Task,
    TaskResult,
    TaskResultStatus,
    default_task_backend,
    task_backends,
)
from django.tasks.exceptions import (
    InvalidTask,
    TaskResultDoesNotExist,
)
from django.tasks.signals import task_enqueued
from django.utils import timezone

from django_emq.backend import FairLanesBackend
from django_emq.engine.ids import mint_job_id, validate_job_id
from django_emq.exceptions import InvalidArguments

from . import settings as contract_settings
from . import tasks as test_tasks
from .conftest import LANE, round_trips


@contextmanager
def captured_enqueued() -> Iterator[list[tuple[Any, TaskResult[Any, Any]]]]:
    received: list[tuple[Any, TaskResult[Any, Any]]] = []

    def capture(sender: Any, task_result: TaskResult[Any, Any], **kwargs: Any) -> None:
        received.append((sender, task_result))

    task_enqueued.connect(capture, dispatch_uid="contract_enqueued", weak=False)
    try:
        yield received
    finally:
        task_enqueued.disconnect(capture, dispatch_uid="contract_enqueued")


def backend() -> FairLanesBackend:
    found = task_backends["default"]
    assert isinstance(found, FairLanesBackend)
    return found


def test_using_correct_backend() -> None:
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], FairLanesBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == {}


@pytest.mark.parametrize("task", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task(task: Task[Any, Any]) -> None:
    task.enqueue()  # the scripts are loaded once per client: not counted below
    with captured_enqueued() as received, round_trips() as sent:
        result = task.enqueue(1, two=3)
    assert sent.sent == 1  # the reference counts one query

    # Difference: ids are minted, ordered JOB ids, not UUIDs (docs/compatibility.md).
    assert validate_job_id(result.id) == result.id
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert result.started_at is None
    assert result.last_attempted_at is None
    assert result.finished_at is None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == task
    assert result.args == [1]
    assert result.kwargs == {"two": 3}
    assert result.attempts == 0
    assert received == [(FairLanesBackend, result)]


@pytest.mark.parametrize("task", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_enqueue_task_async(task: Task[Any, Any]) -> None:
    with captured_enqueued() as received:
        result = async_to_sync(task.aenqueue)()

    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert result.started_at is None
    assert result.last_attempted_at is None
    assert result.finished_at is None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == task
    assert result.args == []
    assert result.kwargs == {}
    assert result.attempts == 0
    assert received == [(FairLanesBackend, result)]


def test_enqueue_with_invalid_argument_writes_nothing(contract: redis.Redis) -> None:
    """Django's ``test_enqueue_with_invalid_argument`` (run unedited in
    tests/upstream), and nothing is written."""
    with pytest.raises(TypeError, match="Unsupported type"):
        test_tasks.noop_task.enqueue(datetime.now())
    assert contract.dbsize() == 0  # and nothing is written


def test_invalid_arguments_stay_a_value_error_too() -> None:
    """Ours: the error is an ``InvalidArguments``, a ``TypeError`` (Django's
    contract) and a ``ValueError`` (what django-emq raised before)."""
    with pytest.raises(InvalidArguments) as caught:
        test_tasks.noop_task.enqueue({1: "a key that is not a string"})
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, ValueError)


def test_get_result() -> None:
    test_tasks.noop_task.enqueue()  # the scripts are loaded once per client
    with round_trips() as sent:
        result = default_task_backend.enqueue(test_tasks.noop_task, [], {})
    assert sent.sent == 1
    with round_trips() as sent:
        new_result = default_task_backend.get_result(result.id)
    assert sent.sent == 1
    assert result == new_result


def test_get_result_async() -> None:
    result = async_to_sync(default_task_backend.aenqueue)(test_tasks.noop_task, [], {})
    new_result = async_to_sync(default_task_backend.aget_result)(result.id)
    assert result == new_result


def test_result_reads_back_as_enqueued_with_using() -> None:
    """A result read back keeps how it was enqueued: ``task.using(queue_name=...,
    run_after=..., backend=...)`` is the task of the result read back."""
    run_after = timezone.now() + timedelta(hours=1)
    task = test_tasks.noop_task.using(queue_name="queue-1", run_after=run_after)
    result = task.enqueue(1)

    read_back = default_task_backend.get_result(result.id)

    assert read_back == result
    assert read_back.task == task
    assert read_back.task.queue_name == "queue-1"
    assert read_back.task.run_after == run_after
    assert read_back.backend == "default"


def test_result_reads_back_through_the_backend_that_enqueued_it() -> None:
    task = test_tasks.noop_task.using(backend="other", queue_name="other")
    result = task.enqueue()

    read_back = task.get_result(result.id)

    assert read_back == result
    assert read_back.task.backend == "other"
    assert read_back.backend == "other"


def test_get_missing_result() -> None:
    """A well-formed id of no job (the reference's is a UUID; ours a JOB id too)."""
    for missing in (str(uuid.uuid4()), mint_job_id()):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(missing)


def test_async_get_missing_result() -> None:
    for missing in (str(uuid.uuid4()), mint_job_id()):
        with pytest.raises(TaskResultDoesNotExist):
            async_to_sync(default_task_backend.aget_result)(missing)


def test_invalid_uuid() -> None:
    """An id that cannot be one."""
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("123")


def test_async_invalid_uuid() -> None:
    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(default_task_backend.aget_result)("123")


def test_invalid_task_path() -> None:
    job = backend().engine("default").enqueue(LANE, "subprocess.check_output", [["exit", "1"]])

    with pytest.raises(
        SuspiciousOperation,
        match=rf"Task {job.job_id} does not point to a Task \(subprocess.check_output\)",
    ):
        default_task_backend.get_result(job.job_id)


def test_missing_task_path() -> None:
    job = backend().engine("default").enqueue(LANE, "missing.func", [])

    with pytest.raises(ImportError):
        default_task_backend.get_result(job.job_id)


def test_check() -> None:
    errors = list(default_task_backend.check())
    assert len(errors) == 0, errors


def test_enqueue_logs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="django.tasks"):
        result = test_tasks.noop_task.enqueue()

    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert len(lines) == 1
    assert "enqueued" in lines[0]
    assert result.id in lines[0]


def test_queue_isolation() -> None:
    default_task = test_tasks.noop_task.enqueue()
    other_task = test_tasks.noop_task.using(queue_name="queue-1").enqueue()

    default_task_backend.get_result(default_task.id)
    default_task_backend.get_result(other_task.id)

    assert backend().engine("default").job(default_task.id) is not None
    assert backend().engine("default").job(other_task.id) is None
    assert backend().engine("queue-1").job(other_task.id) is not None
    assert backend().engine("queue-1").job(default_task.id) is None


def _unknown_queue_task(settings: Any) -> Task[Any, Any]:
    """A task made on a queue the backend then does not serve."""
    settings.TASKS = {
        "default": {"BACKEND": "django_emq.backend.FairLanesBackend", "QUEUES": ["unknown_queue"]}
    }
    task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    settings.TASKS = contract_settings.TASKS
    return task_with_custom_queue_name


def test_validate_on_enqueue(settings: Any) -> None:
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        _unknown_queue_task(settings).enqueue()


def test_validate_on_aenqueue(settings: Any) -> None:
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        async_to_sync(_unknown_queue_task(settings).aenqueue)()


def test_using_priority_is_refused_pointing_to_lane_weights() -> None:
    """Difference: Django's ``test_using_priority`` sets ``priority=1``. Fair
    lanes have no per-job priority (a lane is served more by its weight), so a
    task with a priority is refused when it is made, before anything is written."""
    assert test_tasks.noop_task.priority == 0
    with pytest.raises(InvalidTask, match=r"no numeric priority.*weight"):
        test_tasks.noop_task.using(priority=1)
    assert test_tasks.noop_task.priority == 0


def test_invalid_priority_is_refused() -> None:
    """Django's ``test_invalid_priority``: out-of-range priorities are refused
    (by ours with the lane-weight message, as every non-zero priority is)."""
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask):
            test_tasks.noop_task.using(priority=priority)  # type: ignore[arg-type]
    test_tasks.noop_task.using(priority=0)


def test_pickle_task_result_read_back() -> None:
    result = default_task_backend.get_result(test_tasks.noop_task.enqueue().id)
    if django.VERSION < (6, 1):
        with pytest.raises(pickle.PicklingError):
            pickle.dumps(result)
        return
    assert pickle.loads(pickle.dumps(result)) == result


def test_enqueue_without_a_lane_is_refused_and_writes_nothing(contract: redis.Redis) -> None:
    """Difference: Django's backends take work from anywhere; fair lanes refuse
    work that names no producer, at the call site, writing nothing."""
    from django_emq.lanes import _current_lane

    token = _current_lane.set(None)
    try:
        with pytest.raises(InvalidTask, match="without a lane"):
            test_tasks.noop_task.enqueue()
    finally:
        _current_lane.reset(token)
    assert contract.dbsize() == 0

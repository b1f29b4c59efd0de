"""The worker half of the task contract, with the worker run in this process
until nothing is pending (the reference suites' ``run_worker``; ours is
``run_emq_worker --burst``).

Each test carries the name and the assertions of a test in the django-tasks
reference backends' suites (``DatabaseBackendWorkerTestCase`` of
django-tasks-db, the worker tests of django-tasks-rq) or in Django's
``test_immediate_backend.py``. Log lines and option names particular to
another worker (``db_worker --interval``) have no counterpart here and are
left out; what they check about behaviour is kept.
"""

from __future__ import annotations

from collections import Counter
from contextlib import redirect_stderr
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command, execute_from_command_line
from django.tasks import Task, TaskResultStatus, default_task_backend, task_backends
from django.utils import timezone

from django_emq.backend import FairLanesBackend

from . import tasks as test_tasks
from .conftest import LANE, run_worker


def backend() -> FairLanesBackend:
    found = task_backends["default"]
    assert isinstance(found, FairLanesBackend)
    return found


def pending() -> int:
    """Jobs ready to run in the backend's queues (the reference's ``ready().count()``)."""
    return sum(backend().engine(name).totals().pending for name in backend().queues)


@pytest.mark.parametrize("task", [test_tasks.noop_task, test_tasks.noop_task_async])
def test_run_enqueued_task(task: Task[Any, Any]) -> None:
    result = task.enqueue()
    assert pending() == 1
    assert result.status == TaskResultStatus.READY

    run_worker()

    assert result.status == TaskResultStatus.READY
    assert result.attempts == 0
    result.refresh()
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result.status == TaskResultStatus.SUCCESSFUL  # type: ignore[comparison-overlap]
    assert result.attempts == 1
    assert pending() == 0


def test_refresh_result() -> None:
    result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {})

    run_worker()

    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert result.started_at is None
    assert result.last_attempted_at is None
    assert result.finished_at is None
    assert result.attempts == 0

    result.refresh()

    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert result.return_value == 42
    assert result.attempts == 1


def test_refresh_result_async() -> None:
    result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {})

    run_worker()

    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert result.started_at is None
    assert result.last_attempted_at is None
    assert result.finished_at is None
    assert result.attempts == 0

    async_to_sync(result.arefresh)()

    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert result.return_value == 42
    assert result.attempts == 1


def test_result() -> None:
    """Django's immediate backend's ``test_result``, once a worker ran it."""
    result = default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {})
    run_worker()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 42


def test_batch_processes_all_tasks() -> None:
    results = [test_tasks.noop_task.enqueue() for _ in range(3)]
    failing = test_tasks.failing_task_value_error.enqueue()
    assert pending() == 4

    run_worker()

    assert pending() == 0
    for result in results:
        result.refresh()
    failing.refresh()
    assert [r.status for r in results] == [TaskResultStatus.SUCCESSFUL] * 3
    assert failing.status == TaskResultStatus.FAILED


def test_no_tasks() -> None:
    run_worker()
    assert pending() == 0


def test_doesnt_process_different_queue() -> None:
    result = test_tasks.noop_task.using(queue_name="queue-1").enqueue()
    assert pending() == 1

    run_worker("--queue", "default")
    assert pending() == 1

    run_worker("--queue", result.task.queue_name)
    assert pending() == 0


def test_process_all_queues() -> None:
    """Ours serves every queue of the backend unless ``--queue`` names some."""
    test_tasks.noop_task.using(queue_name="queue-1").enqueue()
    test_tasks.noop_task.enqueue()
    assert pending() == 2

    run_worker()
    assert pending() == 0


@pytest.mark.parametrize(
    ("task", "exception", "message"),
    [
        (test_tasks.failing_task_value_error, ValueError, "This task failed due to ValueError"),
        (test_tasks.failing_task_system_exit, SystemExit, "This task failed due to SystemExit"),
    ],
)
def test_catches_exception(
    task: Task[Any, Any], exception: type[BaseException], message: str
) -> None:
    result = task.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    assert result.is_finished
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result.errors[0].exception_class == exception
    traceback = result.errors[0].traceback
    assert traceback.endswith(f"{exception.__name__}: {message}\n"), traceback
    assert result.task == task
    assert result.args == []
    assert result.kwargs == {}
    assert result.attempts == 1


def test_complex_exception() -> None:
    result = test_tasks.complex_exception.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result._return_value is None  # type: ignore[attr-defined]
    assert result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in result.errors[0].traceback
    assert result.task == test_tasks.complex_exception
    assert result.args == []
    assert result.kwargs == {}
    assert result.attempts == 1


def test_complex_return_value() -> None:
    """Django's immediate backend's assertions (the reference queue backends'
    differ in the message: each says it in its own serialiser's words)."""
    result = test_tasks.complex_return_value.enqueue()

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.FAILED
    assert result.started_at is not None
    assert result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at is not None
    assert result.started_at >= result.enqueued_at
    assert result.finished_at >= result.started_at
    assert result._return_value is None  # type: ignore[attr-defined]
    assert result.errors[0].exception_class is TypeError
    assert "Unsupported type" in result.errors[0].traceback


def test_doesnt_process_different_backend() -> None:
    result = test_tasks.failing_task_value_error.enqueue()
    assert pending() == 1

    run_worker(backend="other")
    assert pending() == 1

    run_worker(backend=result.backend)
    assert pending() == 0


def test_unknown_backend() -> None:
    output = StringIO()
    with redirect_stderr(output), pytest.raises(SystemExit):
        execute_from_command_line(["django-admin", "run_emq_worker", "--backend", "unknown"])
    assert "The connection 'unknown' doesn't exist." in output.getvalue()
    # Ours: one line, no traceback.
    assert output.getvalue().strip().count("\n") == 0, output.getvalue()


def test_incorrect_backend() -> None:
    """The reference's message names its own backend class; ours names ours."""
    output = StringIO()
    with redirect_stderr(output), pytest.raises(SystemExit):
        execute_from_command_line(["django-admin", "run_emq_worker", "--backend", "dummy"])
    assert "TASKS['dummy'] is DummyBackend, not" in output.getvalue()
    assert "FairLanesBackend" in output.getvalue()


@pytest.mark.parametrize("option", ["--max-jobs", "--concurrency", "--lease"])
@pytest.mark.parametrize("value", ["-1", "0"])
def test_negative_or_zero_options_are_refused(option: str, value: str) -> None:
    """The reference's ``test_negative_interval``/``test_negative_max_tasks``."""
    with pytest.raises(CommandError, match="must be"):
        call_command("run_emq_worker", option, value, "--burst")


@pytest.mark.parametrize("option", ["--lease", "--grace"])
def test_infinite_durations_are_refused(option: str) -> None:
    with pytest.raises(CommandError, match="finite"):
        call_command("run_emq_worker", option, "inf", "--burst")


def test_too_long_worker_id() -> None:
    with pytest.raises(CommandError, match="at most 64 characters"):
        call_command("run_emq_worker", "--worker-id", "A" * 65, "--burst")


def test_empty_worker_id() -> None:
    with pytest.raises(CommandError, match="must not be empty"):
        call_command("run_emq_worker", "--worker-id", "", "--burst")


def test_worker_id_with_a_comma_is_refused() -> None:
    """Ours: a job keeps its workers' ids as one comma-separated field."""
    with pytest.raises(CommandError, match="comma"):
        call_command("run_emq_worker", "--worker-id", "a,b", "--burst")


def test_run_after() -> None:
    result = test_tasks.noop_task.using(run_after=timezone.now() + timedelta(hours=10)).enqueue()
    due = test_tasks.noop_task.using(run_after=timezone.now() - timedelta(hours=1)).enqueue()

    run_worker()

    result.refresh()
    due.refresh()
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert due.status == TaskResultStatus.SUCCESSFUL


def test_started_finished_logs(caplog: pytest.LogCaptureFixture) -> None:
    result = test_tasks.noop_task.enqueue()

    with caplog.at_level("DEBUG", logger="django.tasks"):
        run_worker()

    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert len(lines) == 2
    assert "state=RUNNING" in lines[0]
    assert result.id in lines[0]
    assert "state=SUCCESSFUL" in lines[1]
    assert result.id in lines[1]


def test_failed_logs(caplog: pytest.LogCaptureFixture) -> None:
    result = test_tasks.failing_task_value_error.enqueue()

    with caplog.at_level("DEBUG", logger="django.tasks"):
        run_worker()

    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert len(lines) == 2
    assert "state=RUNNING" in lines[0]
    assert result.id in lines[0]
    assert "state=FAILED" in lines[1]
    assert result.id in lines[1]


def test_successful_task_no_none_in_logs(caplog: pytest.LogCaptureFixture) -> None:
    result = test_tasks.noop_task.enqueue()

    with caplog.at_level("DEBUG", logger="django.tasks"):
        run_worker()

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert lines
    for line in lines:
        assert "None" not in line


def test_verbose_logging(caplog: pytest.LogCaptureFixture) -> None:
    result = test_tasks.noop_task.enqueue()

    with caplog.at_level("DEBUG"):
        run_worker(verbosity=3, stdout=StringIO(), stderr=StringIO())

    lines = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert f"Task id={result.id} path={test_tasks.__name__}.noop_task state=RUNNING" in lines
    assert f"Task id={result.id} path={test_tasks.__name__}.noop_task state=SUCCESSFUL" in lines


def test_invalid_task_path() -> None:
    job = backend().engine("default").enqueue(LANE, "subprocess.check_output", [["exit", "1"]])

    run_worker()

    assert backend().engine("default").job(job.job_id)["state"] == "dead"  # type: ignore[index]


def test_missing_task_path() -> None:
    job = backend().engine("default").enqueue(LANE, "missing.func", [])

    run_worker()

    row = backend().engine("default").job(job.job_id)
    assert row is not None
    assert row["state"] == "dead"
    assert "ImportError" in row["errors"] or "ModuleNotFoundError" in row["errors"]


def test_worker_doesnt_exit_on_failure() -> None:
    result = test_tasks.exit_task.enqueue()

    run_worker()

    result.refresh()
    assert result.status == TaskResultStatus.FAILED


def test_max_tasks() -> None:
    results = [test_tasks.noop_task.enqueue() for _ in range(5)]

    run_worker("--max-jobs", "2")

    for result in results:
        result.refresh()
    statuses = Counter(result.status for result in results)
    assert statuses[TaskResultStatus.SUCCESSFUL] == 2
    assert statuses[TaskResultStatus.READY] == 3


def test_takes_context() -> None:
    result = test_tasks.get_task_id.enqueue()

    run_worker()
    result.refresh()

    assert result.return_value == result.id


def test_context() -> None:
    result = test_tasks.check_context.enqueue(1)

    run_worker()
    result.refresh()

    assert result.status == TaskResultStatus.SUCCESSFUL


def test_task_import_string() -> None:
    """A job whose path names nothing in an importable module fails with the
    ``ImportError`` in its traceback."""
    job = backend().engine("default").enqueue(LANE, f"{test_tasks.__name__}.some_test", [])

    run_worker()

    row = backend().engine("default").job(job.job_id)
    assert row is not None
    assert row["state"] == "dead"
    assert "ImportError" in row["errors"]

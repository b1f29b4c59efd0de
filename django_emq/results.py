"""Job rows <-> django.tasks results: the one owner of how a row reads as a
``TaskResult``, of the moments on it and of the task-error record.

- :func:`moment` turns an epoch-ms field into a datetime, aware when
  ``USE_TZ`` is on (the worker, the backend and the admin all use it);
- :func:`encode_error` writes a failure as JSON (django.tasks' ``TaskError``
  fields) and :func:`parse_error` reads it back, leniently;
- :func:`enqueue_meta` is what an enqueue keeps of the task beyond its path
  (the backend alias and ``run_after``), and :func:`task_of` rebuilds the task
  as it was enqueued from it (``task.using(...)`` included);
- :func:`enqueued_result` and :func:`result_from_row` build the results, so the
  one ``enqueue`` answers equals the one ``get_result`` reads back.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
from django.utils import timezone
from django.utils.module_loading import import_string

from .engine.exceptions import CorruptJob
from .engine.history import read_count
from .engine.payload import decode
from .engine.records import MAX_ATTEMPTS_LIMIT
from .engine.rows import Row, worker_ids

#: Job row state -> django.tasks status.
STATUS = {
    "pending": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}

#: The class path an error recorded as plain text (not by :func:`encode_error`) reads as.
UNKNOWN_ERROR_CLASS = "builtins.Exception"

#: More claims than any job's row counts: its failures and its lease expiries
#: are each bounded by ``MAX_ATTEMPTS_LIMIT``, and a release (a worker shutting
#: down) is rare. A row counting more was edited by hand; reading it as that
#: many ``worker_ids`` would take all the memory there is.
MOST_CLAIMS = 100 * MAX_ATTEMPTS_LIMIT


def moment(ms: str | int | None) -> datetime | None:
    """The datetime an epoch-ms value stands for (aware with ``USE_TZ``, else naive
    in the current time zone, as Django stores datetimes), or ``None``: also for
    a value that is no whole number or lies outside the years datetime knows (a
    row edited by hand), so one odd field never breaks a page or a result."""
    if not ms:
        return None
    try:
        at = datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
        return at if settings.USE_TZ else timezone.make_naive(at)
    except (ValueError, OverflowError, OSError):
        return None


# -- the task-error record ------------------------------------------------------


def encode_error(exc: BaseException, traceback: str) -> str:
    """The JSON text a failure is kept as: django.tasks' ``TaskError`` fields."""
    cls = type(exc)
    return json.dumps(
        {"exception_class_path": f"{cls.__module__}.{cls.__qualname__}", "traceback": traceback}
    )


def parse_error(text: str) -> TaskError:
    """The ``TaskError`` a recorded failure stands for. Text that is not a record
    (an error written through the engine directly, a row edited by hand) is its
    own traceback, of class :data:`UNKNOWN_ERROR_CLASS`."""
    try:
        data = json.loads(text)
        return TaskError(
            exception_class_path=str(data["exception_class_path"]),
            traceback=str(data["traceback"]),
        )
    except (ValueError, KeyError, TypeError):
        return TaskError(exception_class_path=UNKNOWN_ERROR_CLASS, traceback=text)


def error_parts(text: str) -> tuple[str, str]:
    """(exception class path, traceback) of a recorded failure, for display: the
    class path is empty when the text is not a record."""
    error = parse_error(text)
    if error.exception_class_path == UNKNOWN_ERROR_CLASS and error.traceback == text:
        return "", text
    return error.exception_class_path, error.traceback


# -- the task as enqueued ------------------------------------------------------


def enqueue_meta(task: Task[Any, Any], alias: str) -> dict[str, Any]:
    """What an enqueue keeps of ``task`` beyond its path (the row's ``meta``)."""
    meta: dict[str, Any] = {"backend": alias}
    if task.run_after is not None:
        meta["run_after"] = task.run_after.isoformat()
    return meta


def task_of(job_id: str, path: str, queue_name: str, meta: Mapping[str, Any]) -> Task[Any, Any]:
    """The task a job was enqueued as: the module's task at ``path``, with the
    queue, ``run_after`` and backend it was enqueued with.

    ``ImportError`` when its module no longer imports (or lacks the name);
    ``SuspiciousOperation`` when the path names something that is not a Task.
    A task whose backend or queue is no longer configured reads back as the
    module's task: the job is still there to be read.
    """
    found = import_string(path)
    if not isinstance(found, Task):
        raise SuspiciousOperation(f"Task {job_id} does not point to a Task ({path})")
    changes: dict[str, Any] = {}
    if queue_name != found.queue_name:
        changes["queue_name"] = queue_name
    backend = meta.get("backend")
    if isinstance(backend, str) and backend != found.backend:
        changes["backend"] = backend
    run_after = meta.get("run_after")
    if isinstance(run_after, str):
        with contextlib.suppress(ValueError):  # unreadable: the module's run_after stands
            changes["run_after"] = datetime.fromisoformat(run_after)
    if not changes:
        return found
    try:
        return found.using(**changes)
    except (InvalidTask, InvalidTaskBackend):
        return found


def meta_of(row: Mapping[str, str]) -> dict[str, Any]:
    """A row's ``meta`` (empty when missing or unreadable)."""
    return _lenient(row.get(Row.META), dict)


# -- results -------------------------------------------------------------------


def enqueued_result(
    task: Task[Any, Any],
    job_id: str,
    enqueued_ms: int,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    alias: str,
) -> TaskResult[Any, Any]:
    """The READY result an enqueue answers, stamped with the server's clock (as
    the row is), so it equals the one :func:`result_from_row` reads back."""
    return TaskResult(
        task=task,
        id=job_id,
        status=TaskResultStatus.READY,
        enqueued_at=moment(enqueued_ms),
        started_at=None,
        last_attempted_at=None,
        finished_at=None,
        args=list(args),
        kwargs=dict(kwargs),
        backend=alias,
        errors=[],
        worker_ids=[],
    )


def result_from_row(
    task: Task[Any, Any], job_id: str, row: Mapping[str, str], alias: str
) -> TaskResult[Any, Any]:
    """Build the ``TaskResult`` a job row stands for. ``CorruptJob`` (naming the
    job and the field) when the row was edited past reading: a done job's
    result that is not JSON, or a count of claims no job reaches. Other odd
    fields read leniently (a moment that is no number reads as unset)."""
    state = row.get(Row.STATE, "")
    attempts = read_count(row.get(Row.ATTEMPTS))
    if attempts > MOST_CLAIMS:
        raise CorruptJob(
            job_id,
            f"corrupt job row: field {Row.ATTEMPTS!r} counts {attempts} claims, "
            f"more than any job makes ({MOST_CLAIMS})",
        )
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=job_id,
        status=STATUS.get(state, TaskResultStatus.READY),
        enqueued_at=moment(row.get(Row.ENQUEUED)),
        started_at=moment(row.get(Row.STARTED)),
        last_attempted_at=moment(row.get(Row.CLAIMED)),
        finished_at=moment(row.get(Row.FINISHED))
        if state in ("done", "dead", "cancelled")
        else None,
        args=_lenient(row.get(Row.ARGS), list),
        kwargs=_lenient(row.get(Row.KWARGS), dict),
        backend=alias,
        errors=[parse_error(str(text)) for text in _lenient(row.get(Row.ERRORS), list)],
        worker_ids=worker_ids(row.get(Row.WORKERS, ""), attempts),
    )
    if state == "done":
        try:
            value = decode(row.get(Row.RESULT))
        except ValueError:
            raise CorruptJob(
                job_id, f"corrupt job row: field {Row.RESULT!r} (its return value) is not JSON"
            ) from None
        object.__setattr__(result, "_return_value", value)
    return result


def _lenient[T](text: str | None, kind: type[T]) -> T:
    """Decode JSON kept on a row; an empty ``kind`` when it is missing or corrupt
    (a row edited by hand still reads, its error says what was wrong)."""
    try:
        value = decode(text)
    except ValueError:
        return kind()
    return value if isinstance(value, kind) else kind()

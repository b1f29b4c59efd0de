"""``FairLanesBackend``: django.tasks on fair lanes.

Configure it in ``TASKS``::

    TASKS = {"default": {"BACKEND": "django_emq.backend.FairLanesBackend",
                         "QUEUES": ["default"]}}

``task.enqueue(...)`` rides the current lane (see :mod:`django_emq.lanes`);
with none it raises ``InvalidTask`` and writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis
from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import DEFAULT_TASK_PRIORITY, TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.module_loading import import_string

from .conf import emq_settings
from .connection import get_connection
from .engine.ids import validate_job_id, validate_queue_name
from .engine.payload import decode, encode_arguments
from .engine.queue import Queue
from .engine.shards import AnyQueue, open_queue
from .exceptions import EnqueueError, InvalidArguments
from .lanes import current_lane, current_unique_key

#: Job row state -> django.tasks status.
STATUS = {
    "pending": TaskResultStatus.READY,
    "scheduled": TaskResultStatus.READY,
    "active": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
}


def moment(ms: str | int | None) -> datetime | None:
    """The datetime an epoch-ms field stands for (aware with USE_TZ), or ``None``."""
    if not ms:
        return None
    moment = datetime.fromtimestamp(int(ms) / 1000, tz=UTC)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def task_error(exc: BaseException, traceback: str) -> str:
    """The JSON text a failure is kept as: django.tasks' ``TaskError`` fields."""
    cls = type(exc)
    return json.dumps(
        {"exception_class_path": f"{cls.__module__}.{cls.__qualname__}", "traceback": traceback}
    )


def _errors(row: Mapping[str, str]) -> list[TaskError]:
    errors = []
    for text in _lenient(row.get("errors"), list):
        try:
            data = json.loads(text)
            errors.append(
                TaskError(
                    exception_class_path=data["exception_class_path"], traceback=data["traceback"]
                )
            )
        except (ValueError, KeyError, TypeError):
            errors.append(TaskError(exception_class_path="builtins.Exception", traceback=text))
    return errors


def _lenient[T](text: str | None, kind: type[T]) -> T:
    """Decode JSON kept on a row; an empty ``kind`` when it is missing or corrupt
    (a row edited by hand still reads, its error says what was wrong)."""
    try:
        value = decode(text)
    except ValueError:
        return kind()
    return value if isinstance(value, kind) else kind()


def result_from_row(
    task: Task[Any, Any], job_id: str, row: Mapping[str, str], alias: str
) -> TaskResult[Any, Any]:
    """Build the ``TaskResult`` a job row stands for."""
    result: TaskResult[Any, Any] = TaskResult(
        task=task,
        id=job_id,
        status=STATUS.get(row.get("state", ""), TaskResultStatus.READY),
        enqueued_at=moment(row.get("enq")),
        started_at=moment(row.get("started")),
        last_attempted_at=moment(row.get("claimed")),
        finished_at=moment(row.get("finished")) if row.get("state") in ("done", "dead") else None,
        args=_lenient(row.get("args"), list),
        kwargs=_lenient(row.get("kwargs"), dict),
        backend=alias,
        errors=_errors(row),
        worker_ids=[w for w in row.get("workers", "").split(",") if w],
    )
    if row.get("state") == "done":
        object.__setattr__(result, "_return_value", decode(row.get("result")))
    return result


class FairLanesBackend(BaseTaskBackend):
    """Runs django.tasks on django-emq's fair lanes."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # Queue names are checked by ``check`` (emq.E006), not here: Django builds
        # every backend to run the system checks, so raising here would turn a
        # typo into a traceback instead of a check error. A bad name still
        # raises ``ValueError`` when the queue is used.
        super().__init__(alias, params)
        self._queues: dict[tuple[str, int], AnyQueue] = {}

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """emq.E006 for each name in ``QUEUES`` that cannot name a queue."""
        errors: list[CheckMessage] = []
        for name in sorted(self.queues, key=repr):
            try:
                validate_queue_name(name)
            except ValueError as exc:
                errors.append(
                    Error(
                        f"TASKS[{self.alias!r}]['QUEUES']: {exc}",
                        hint="Rename it in TASKS, and in every task's queue_name.",
                        id="emq.E006",
                    )
                )
        return [*super().check(**kwargs), *errors]

    def queue(self, name: str) -> Queue:
        """The engine queue behind ``name`` on the current connection.

        ``ValueError`` for a queue ``EMQ["SHARDS"]`` shards: :meth:`engine`
        answers its :class:`~django_emq.engine.shards.ShardedQueue`.
        """
        found = self.engine(name)
        if len(found.shards) > 1:
            raise ValueError(
                f"queue {name!r} has {len(found.shards)} shards (EMQ['SHARDS']): "
                f"backend.engine({name!r}) answers it"
            )
        return found.shards[0]

    def engine(self, name: str) -> AnyQueue:
        """The engine queue behind ``name`` on the current connection: a
        :class:`~django_emq.engine.shards.ShardedQueue` when ``EMQ["SHARDS"]`` shards
        it, else a :class:`~django_emq.engine.queue.Queue`."""
        connection = get_connection()
        key = (name, id(connection))
        found = self._queues.get(key)
        if found is None:
            s = emq_settings()
            found = open_queue(
                name, connection=connection, shards=s.shards.get(name, 1), **s.queue_options(name)
            )
            self._queues = {k: v for k, v in self._queues.items() if k[1] == id(connection)}
            self._queues[key] = found
        return found

    def validate_task(self, task: Task[Any, Any]) -> None:
        if task.priority != DEFAULT_TASK_PRIORITY:
            raise InvalidTask(
                "django-emq has no numeric priority: a lane that should be served more "
                "carries a weight (queue.set_weight(lane, w)), so fairness stays a property "
                "of lanes, not jobs. Remove priority= from the task."
            )
        super().validate_task(task)

    def check_arguments(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        """Refuse arguments that do not survive a JSON round trip (nothing is written)."""
        self.validate_task(task)
        encode_arguments(args, kwargs, emq_settings().max_payload)

    def enqueue(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[Any, Any]:
        self.validate_task(task)
        lane = current_lane()
        if lane is None:
            raise InvalidTask(
                f"{task.module_path} was enqueued without a lane. Use "
                "django_emq.enqueue_for(request.user, task, ...), wrap the call in "
                "`with django_emq.lane(user):`, or add django_emq.lanes.LaneMiddleware."
            )
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)
        queue = self.engine(task.queue_name)
        try:
            enqueued = queue.enqueue(
                lane,
                task.module_path,
                args,
                kwargs,
                run_after=run_after,
                meta={"backend": self.alias},
                unique_key=current_unique_key(),
            )
        except InvalidArguments as exc:
            raise InvalidArguments(f"{task.module_path}: {exc}") from None
        except redis.ConnectionError as exc:  # a cluster client could not be built
            raise EnqueueError(
                f"could not reach Valkey to enqueue on {task.queue_name!r}: {exc}"
            ) from exc
        if enqueued.duplicate:  # a job holding the unique key answers in its place
            row = queue.job(enqueued.job_id)
            if row is not None:
                return result_from_row(task, enqueued.job_id, row, self.alias)
        # Built here rather than read back: no second round trip per enqueue.
        result: TaskResult[Any, Any] = TaskResult(
            task=task,
            id=enqueued.job_id,
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        try:
            validate_job_id(result_id)
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        for name in sorted(self.queues):
            row = self.engine(name).job(result_id)
            if row is None:
                continue
            try:
                task = import_string(row.get("task", ""))
            except ImportError:
                raise TaskResultDoesNotExist(
                    f"{result_id}: its task {row.get('task', '(none)')} no longer imports"
                ) from None
            return result_from_row(task, result_id, row, self.alias)
        raise TaskResultDoesNotExist(result_id)

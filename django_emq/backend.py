"""``FairLanesBackend``: django.tasks on fair lanes.

Configure it in ``TASKS``::

    TASKS = {"default": {"BACKEND": "django_emq.backend.FairLanesBackend",
                         "QUEUES": ["default"]}}

``task.enqueue(...)`` rides the current lane (see ``django_emq.lanes``);
with none it raises ``InvalidTask`` and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import redis
from django.core.checks import CheckMessage, Error, Warning
from django.tasks import Task, TaskResult
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import DEFAULT_TASK_PRIORITY
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone
from django.utils.json import normalize_json

from .conf import DOCS, emq_settings, option_problems
from .connection import get_connection
from .engine.client import Client
from .engine.exceptions import unreachable
from .engine.ids import validate_job_id, validate_queue_name
from .engine.payload import encode_arguments, text
from .engine.placement import shard_tags
from .engine.queue import Queue
from .engine.rows import Row
from .engine.shards import AnyQueue, open_queue
from .exceptions import CorruptKeyspace, EnqueueError, InvalidArguments
from .lanes import current_lane, current_tenant, current_unique_key
from .results import (
    STATUS,
    enqueue_meta,
    enqueued_result,
    meta_of,
    moment,
    result_from_row,
    task_of,
)
from .results import encode_error as task_error

#: The registry of queue names (a set, one per server or cluster, outside any
#: queue's ``{q}`` hash tag): a backend with ``QUEUES: []`` adds each queue it
#: enqueues to, and its workers serve every name in it.
QUEUE_REGISTRY = "emq:queues"

#: Re-exported for the worker and for code written against earlier releases.
__all__ = [
    "QUEUE_REGISTRY",
    "STATUS",
    "FairLanesBackend",
    "moment",
    "result_from_row",
    "task_error",
]


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
        #: (queue name, id of the connection) already in the registry.
        self._registered: set[tuple[str, int]] = set()

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """emq.E006 for each name in ``QUEUES`` that cannot name a queue, emq.E008
        for each problem of ``OPTIONS`` and emq.W004 for each queue another
        FairLanesBackend serves too. An empty ``QUEUES`` is Django's "any queue
        name" (see ``served_queues``)."""
        errors: list[CheckMessage] = []
        where = f"TASKS[{self.alias!r}]"
        for name in sorted(self.queues, key=repr):
            try:
                validate_queue_name(name)
            except ValueError as exc:
                errors.append(
                    Error(
                        f"{where}['QUEUES']: {exc}",
                        hint="Rename it in TASKS, and in every task's queue_name.",
                        id="emq.E006",
                    )
                )
        errors += [
            Error(problem, hint=f"See {DOCS}settings/#per-backend-options.", id="emq.E008")
            for problem in option_problems(self.alias)
        ]
        for name, other in self._shared_queues():
            errors.append(
                Warning(
                    f"Queue {name!r} is served by both {where} and TASKS[{other!r}]: they "
                    "share its jobs, and a worker of either runs both's with its own options.",
                    hint="Give each FairLanesBackend alias queue names of its own.",
                    id="emq.W004",
                )
            )
        return [*super().check(**kwargs), *errors]

    def _shared_queues(self) -> list[tuple[str, str]]:
        """(queue, other alias) for each queue another FairLanesBackend serves too."""
        backends = fair_backends()
        if self.alias not in backends:  # built by hand, not from TASKS
            return []
        shared = []
        for alias, other in backends.items():
            if alias != self.alias:
                shared += [(name, alias) for name in sorted(self.queues & other.queues)]
        return shared

    def queue(self, name: str) -> Queue:
        """The engine queue behind ``name`` on the current connection.

        ``ValueError`` for a queue ``EMQ["SHARDS"]`` shards: ``engine``
        answers its ``ShardedQueue``.
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
        ``ShardedQueue`` when ``EMQ["SHARDS"]`` shards
        it, else a ``Queue``."""
        connection = get_connection()
        key = (name, id(connection))
        found = self._queues.get(key)
        if found is None:
            s = emq_settings(self.alias)
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
        if not self.queues:  # any queue name: Django checks none, the engine needs one
            try:
                validate_queue_name(task.queue_name)
            except ValueError as exc:
                raise InvalidTask(str(exc)) from None
            for name, count in emq_settings(self.alias).shards.items():
                if task.queue_name in shard_tags(name, count):  # emq.E005, at the call site
                    raise InvalidTask(
                        f"queue {task.queue_name!r} has the name of a shard of the sharded "
                        f"queue {name!r} (EMQ['SHARDS']): the two would share their keys"
                    )

    @property
    def serves_any_queue(self) -> bool:
        """``QUEUES: []``: Django's "any queue name". Each enqueue records its
        queue's name in the registry (``QUEUE_REGISTRY``), whose queues a
        worker serves."""
        return not self.queues

    def served_queues(self) -> list[str]:
        """The names of the queues this backend serves: its ``QUEUES``, or with
        an empty list every name in the registry (read from the server) and the
        queue of every periodic schedule no other backend lists (its workers
        tick it, so it fires before any enqueue registers its queue)."""
        if self.queues:
            return sorted(self.queues)
        return sorted({*registered_queues(get_connection()), *unlisted_schedule_queues()})

    def _register(self, name: str) -> None:
        """Record queue ``name`` in the registry once per process and connection
        (a backend serving any queue name only; one SADD, once the job is checked
        and before it is written, so a worker that reads the registry finds every
        queue holding a job, and a refused enqueue registers nothing)."""
        if self.queues:
            return
        connection = get_connection()
        key = (name, id(connection))
        if key in self._registered:
            return
        try:
            connection.sadd(QUEUE_REGISTRY, name)
        except redis.ResponseError as exc:
            raise _damaged_registry(exc) from exc
        self._registered = {k for k in self._registered if k[1] == id(connection)} | {key}

    def check_arguments(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> None:
        """Refuse arguments that do not survive a JSON round trip (nothing is written)."""
        self.validate_task(task)
        args, kwargs = _normalised(task, args, kwargs)
        try:
            encode_arguments(args, kwargs, emq_settings(self.alias).max_payload)
        except InvalidArguments as exc:
            raise InvalidArguments(f"{task.module_path}: {exc}") from None

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
        args, kwargs = _normalised(task, args, kwargs)
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)
        if run_after is not None and run_after <= timezone.now():
            # Django's run_after is the earliest a task may run: any time past is
            # now (the engine refuses one over a day old as a likely mistake; the
            # backend's contract is Django's, which validates only that it is
            # aware), and the job's wait starts at its enqueue.
            run_after = None
        try:
            queue = self.engine(task.queue_name)
            enqueued = queue.enqueue(
                lane,
                task.module_path,
                args,
                kwargs,
                run_after=run_after,
                meta=enqueue_meta(task, self.alias),
                unique_key=current_unique_key(),
                tenant=current_tenant(),
                # once the job is checked: a refused enqueue registers nothing
                before_write=partial(self._register, task.queue_name),
            )
        except InvalidArguments as exc:
            raise InvalidArguments(f"{task.module_path}: {exc}") from None
        except redis.ConnectionError as exc:  # a cluster client could not be built
            raise EnqueueError(
                f"cannot enqueue on {task.queue_name!r}: {unreachable(exc)}"
            ) from exc
        if enqueued.duplicate:  # a job holding the unique key answers in its place
            row = queue.job(enqueued.job_id)
            if row is not None:
                return result_from_row(task, enqueued.job_id, row, self.alias)
        # Stamped with the time the script wrote on the row: it equals the result
        # read back, at no second round trip.
        result = enqueued_result(
            task, enqueued.job_id, enqueued.enqueued_ms, args, kwargs, self.alias
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any, Any]:
        """The result of job ``result_id``, with its task as it was enqueued.

        ``TaskResultDoesNotExist`` when no queue of this backend holds it (never
        enqueued, or its result expired); ``ImportError`` when its task's module
        no longer imports; ``SuspiciousOperation`` when its path names something
        that is not a Task.
        """
        try:
            validate_job_id(result_id)
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        for name in self.served_queues():
            row = self.engine(name).job(result_id)
            if row is None:
                continue
            meta = meta_of(row)
            task = task_of(result_id, row.get(Row.TASK, ""), name, meta)
            alias = meta.get("backend")
            return result_from_row(
                task, result_id, row, alias if isinstance(alias, str) else self.alias
            )
        raise TaskResultDoesNotExist(result_id)


def _normalised(
    task: Task[Any, Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as django.tasks' ``TaskResult`` keeps them (tuples as lists,
    UTF-8 bytes as text); what JSON cannot hold is refused with Django's own
    message, as an ``InvalidArguments`` (a ``TypeError`` and a ``ValueError``), and
    so is an argument that holds itself or is nested deeper than Python recurses."""
    try:
        normal_args: list[Any] = normalize_json(list(args))  # type: ignore[assignment]
        normal_kwargs: dict[str, Any] = normalize_json(dict(kwargs))  # type: ignore[assignment]
    except RecursionError:
        raise InvalidArguments(
            f"{task.module_path}: task arguments are circular (an argument holds itself) "
            "or nested too deeply to encode as JSON"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidArguments(
            f"{task.module_path}: task arguments must be JSON-serialisable: {exc}"
        ) from None
    return normal_args, normal_kwargs


def _damaged_registry(exc: redis.ResponseError) -> Exception:
    """The registry of queue names refused a set command: of the wrong type
    (``CorruptKeyspace`` naming it), or refused for another reason (as it was)."""
    if str(exc).startswith("WRONGTYPE"):
        return CorruptKeyspace(QUEUE_REGISTRY, "is not a set of queue names")
    return exc


def registered_queues(connection: Client) -> list[str]:
    """The valid queue names in the registry, sorted (a name that cannot name a
    queue, written by hand, is passed over). A registry of the wrong type raises
    ``CorruptKeyspace`` naming it (``manage.py emq_doctor --repair`` rebuilds it)."""
    names = []
    try:
        members = connection.smembers(QUEUE_REGISTRY)
    except redis.ResponseError as exc:
        raise _damaged_registry(exc) from exc
    for raw in members:
        name = text(raw)  # a member that is not UTF-8 reads as no queue name
        try:
            validate_queue_name(name)
        except ValueError:
            continue
        names.append(name)
    return sorted(names)


def unlisted_schedule_queues() -> set[str]:
    """The queues of the periodic schedules (configured and registered) that no
    ``FairLanesBackend`` in ``TASKS`` lists in its ``QUEUES``: those a backend
    with ``QUEUES: []`` serves for them (system check ``emq.E010`` reports one
    when there is no such backend)."""
    from .schedules import schedules

    listed: set[str] = set()
    for other in fair_backends().values():
        listed |= other.queues
    return {s.queue for s in schedules(emq_settings().schedules).values()} - listed


def fair_backends() -> dict[str, FairLanesBackend]:
    """Every ``FairLanesBackend`` in ``TASKS``, by alias, in ``TASKS`` order; an
    alias that cannot be built is passed over (Django's own check reports it)."""
    from django.tasks import task_backends
    from django.tasks.exceptions import InvalidTaskBackend

    found: dict[str, FairLanesBackend] = {}
    for alias in task_backends.settings:
        try:
            backend = task_backends[alias]
        except InvalidTaskBackend:
            continue
        if isinstance(backend, FairLanesBackend):
            found[alias] = backend
    return found


def configured_queues() -> dict[str, FairLanesBackend]:
    """Every queue of every ``FairLanesBackend`` in ``TASKS``, by name (for a
    backend with ``QUEUES: []``, the registry's: read from the server)."""
    found: dict[str, FairLanesBackend] = {}
    for backend in fair_backends().values():
        for name in backend.served_queues():
            found.setdefault(name, backend)
    return dict(sorted(found.items()))

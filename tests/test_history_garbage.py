"""Garbage inside the history's keys (a hand edit: a minute's field that is no
count, a lane wait field that names no lane, a finished member that is no job
id): the metrics, the stats, the charts and the job list still answer, reading
such an entry as absent; the doctor reports it, and a repair removes it and
nothing else (and says what it did). A lane's setting or the pending total
that is no number reads as absent too: one hand-edited field never fails a
metrics scrape."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.core.management import CommandError, call_command
from django.test import Client

from django_emq.engine.doctor import Doctor
from django_emq.engine.queue import Queue

from .helpers import claim_one, fill, lane
from .test_admin import make_user, q, viewer

__all__ = ["make_user", "q", "viewer"]  # fixtures used below

pytestmark = pytest.mark.django_db
JOBS = "/admin/django_emq/job/"
GARBAGE: dict[Any, Any] = {"done": "abc", "w5": "x", "w999": "3", "wzz": "1"}


def finish_three(q: Queue) -> list[str]:
    """Three jobs run and done (their history recorded); their ids."""
    fill(q, lane(1), 3)
    done = []
    for _ in range(3):
        claim = claim_one(q)
        q.complete(claim.job_id, claim.token)
        done.append(claim.job_id)
    return done


def vandalise(r: redis.Redis, q: Queue) -> tuple[str, str]:
    """Garbage in this minute's hash, this hour's lane waits and the finished
    window (one entry of each not even UTF-8); the two hashes' keys."""
    seconds, _ = r.time()
    minute, hour = q.keys.minute(int(seconds) // 60), q.keys.lane_waits(int(seconds) // 3600)
    r.hset(minute, mapping=GARBAGE)
    r.hset(hour, mapping={f"{lane(1)}:zz": "1", "nolane": "2", f"{lane(1)}:5": "x"})
    r.zadd(q.keys.finished, {"../x": 1})
    for key in (minute, hour):
        r.hset(key, NOT_UTF8, "1")
    r.zadd(q.keys.finished, {NOT_UTF8: 2})
    return minute, hour


#: A field or member that is not UTF-8 (reported with U+FFFD, removed as held).
NOT_UTF8 = b"\xff\xfe"


def test_the_metrics_stats_charts_and_job_list_read_garbage_as_absent(
    q: Queue, viewer: Client, emq: redis.Redis
) -> None:
    done = finish_three(q)
    vandalise(emq, q)
    metrics = viewer.get("/emq/metrics")
    assert metrics.status_code == 200
    assert 'emq_wait_seconds{queue="default",quantile="0.95"}' in metrics.content.decode()
    assert viewer.get("/emq/stats").status_code == 200
    assert viewer.get(JOBS + "charts/default/").status_code == 200
    finished = viewer.get(JOBS, {"state": "finished"})
    assert finished.status_code == 200
    page = finished.content.decode()
    assert all(job_id in page for job_id in done)
    assert "../x" not in page


def test_the_doctor_reports_history_garbage_and_a_repair_removes_only_it(
    q: Queue, emq: redis.Redis
) -> None:
    done = finish_three(q)
    minute, hour = vandalise(emq, q)
    names = {name.encode() for name in GARBAGE} | {NOT_UTF8}
    kept_minute = {k: v for k, v in emq.hgetall(minute).items() if k not in names}
    before = emq.hgetall(hour)
    report = Doctor(q).audit()
    found = {(f.what, f.subject) for f in report.findings}
    assert {("history", name) for name in GARBAGE} <= found
    assert {("history", f"{lane(1)}:zz"), ("history", "nolane"), ("history", "../x")} <= found
    assert ("history", f"{lane(1)}:5") in found
    assert report.problems == 11
    assert len(emq.hgetall(minute)) == len(kept_minute) + len(GARBAGE) + 1, (
        "the audit changes nothing"
    )

    mended, after = Doctor(q).repair()
    assert mended.mended == 11
    assert all("removed" in f.detail for f in mended.findings)
    assert after.clean
    assert emq.hgetall(minute) == kept_minute
    garbage = {f"{lane(1)}:zz".encode(), b"nolane", f"{lane(1)}:5".encode(), NOT_UTF8}
    assert emq.hgetall(hour) == {k: v for k, v in before.items() if k not in garbage}
    assert sorted(emq.zrange(q.keys.finished, 0, -1)) == sorted(j.encode() for j in done)


def test_emq_doctor_repair_says_what_it_did(
    q: Queue, emq: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    finish_three(q)
    minute, _ = vandalise(emq, q)
    emq.set(q.keys.minute(0), "a string, not a hash")
    with pytest.raises(CommandError):
        call_command("emq_doctor", "--queue", "default")
    out = capsys.readouterr().out
    assert f"type: {q.keys.minute(0)} (a string, not a hash)\n" in out
    assert f"history: done (in {minute}: 'abc' is no count)" in out
    call_command("emq_doctor", "--queue", "default", "--repair")
    out = capsys.readouterr().out
    assert f"type: {q.keys.minute(0)} (a string, not a hash: deleted)" in out
    assert f"history: done (in {minute}: 'abc' is no count, removed)" in out
    assert "after the repair: 0 problem(s)" in out


@pytest.mark.parametrize("attr", ["stats", "ceilings", "weights", "max_depths", "rates"])
def test_one_hand_edited_setting_or_total_never_fails_a_scrape(
    q: Queue, viewer: Client, emq: redis.Redis, attr: str
) -> None:
    """A lane's setting or the pending total that is no number reads as absent
    (the lane's default), so the metrics and the stats still answer."""
    finish_three(q)
    fill(q, lane(1), 2)
    q.set_limit(lane(1), 5)
    q.set_weight(lane(1), 2)
    q.set_max_depth(lane(1), 100)
    q.set_rate(lane(1), 5, 1)
    key = getattr(q.keys, attr)
    emq.hset(key, "pending" if attr == "stats" else lane(1), "zz")
    assert viewer.get("/emq/metrics").status_code == 200
    assert viewer.get("/emq/stats").status_code == 200
    (info,) = q.lanes_named([lane(1)])
    settings: dict[str, object] = {"ceilings": info.ceiling, "weights": info.weight}
    settings |= {"max_depths": info.max_depth, "rates": info.rate, "stats": q.totals().pending}
    assert settings[attr] == {"weights": 1, "stats": 0}.get(attr)

"""The worker's per-job lines written a batch at a time (``logs.Lines``): the
same text ``job_line`` writes, through the worker's own handler, and records as
before whenever anything else could see them; and the claim's JSON read by the
parser's scanner alone, exactly as ``json.loads`` reads it."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from django_emq.engine.payload import decode
from django_emq.engine.records import Claim
from django_emq.engine.rows import worker_ids
from django_emq.worker import logs
from django_emq.worker.jobs import Job

STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")


def job(n: int, error: str | None = None) -> Job:
    claim = Claim(f"JOB{n:017d}", "USR00000000001", 1, "tests.tasks.add", [1, 2], {}, 0, 0)
    ran = Job(None, claim, 0.0)  # type: ignore[arg-type]
    ran.started, ran.ended, ran.error = 10.0, 10.25, error
    return ran


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """The worker's own handler on ``django_emq``, as ``run_emq_worker`` sets it
    up when the project's LOGGING gives the root logger no handler (pytest's
    capture handlers, which it adds as a test starts, taken off)."""
    out = io.StringIO()
    handler = logs.LineHandler()
    handler.setStream(out)
    handler.setFormatter(logs.LineFormatter(logs.FORMAT))
    emq = logging.getLogger("django_emq")
    saved = (emq.level, emq.handlers[:], emq.propagate)
    emq.setLevel(logging.INFO)
    emq.propagate = False
    _alone.append(handler)
    try:
        yield out
    finally:
        _alone.clear()
        emq.setLevel(saved[0])
        emq.handlers[:] = saved[1]
        emq.propagate = saved[2]


def written(out: io.StringIO) -> list[str]:
    """The lines written, each without its timestamp."""
    lines = out.getvalue().splitlines()
    assert all(STAMP.match(line) for line in lines), lines
    return [STAMP.sub("", line) for line in lines]


#: The handler of :func:`stream` (the only one ``django_emq`` has in a test).
_alone: list[logs.LineHandler] = []


def alone() -> None:
    logging.getLogger("django_emq").handlers[:] = _alone


def by_lines(jobs: list[tuple[Job, str, str | None]]) -> None:
    with logs.batch() as lines:
        for ran, outcome, reason in jobs:
            lines.write(ran, outcome, reason)


def by_records(jobs: list[tuple[Job, str, str | None]]) -> None:
    with logs.batch():
        for ran, outcome, reason in jobs:
            logs.job_line(ran, outcome, reason)


BATCH = [
    (job(1), "done", None),
    (job(2), "stale", "lease lost to a newer attempt; outcome refused"),
    (job(3), "done", None),
]


def test_a_batchs_lines_are_the_text_its_records_would_print(stream: io.StringIO) -> None:
    alone()
    by_records(BATCH)
    expected = written(stream)
    stream.seek(0)
    stream.truncate()
    assert logs._sole_handler() is not None, "the worker's handler alone: lines skip records"
    by_lines(BATCH)
    assert written(stream) == expected
    assert expected[0] == (
        f"INFO django_emq.worker lane=USR00000000001 job={BATCH[0][0].job_id} "
        "task=tests.tasks.add attempt=1 duration=0.250s outcome=done"
    )
    assert expected[1].startswith("WARNING "), "the lines keep their order"


def test_a_filter_or_another_handler_gets_records_as_before(stream: io.StringIO) -> None:
    """Anything else that could see a record (a filter, a second handler, a record
    factory of the project's) gets one per line, as without batching."""
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    alone()
    extra = Keep()
    logging.getLogger("django_emq").addHandler(extra)
    assert logs._sole_handler() is None
    by_lines(BATCH)
    assert [r.getMessage().rsplit("outcome=", 1)[1] for r in seen] == ["done", "stale", "done"]
    assert len(written(stream)) == 3
    logging.getLogger("django_emq").removeHandler(extra)

    def refuse(record: logging.LogRecord) -> bool:
        return "JOB00000000000000001" not in record.getMessage()

    worker = logging.getLogger("django_emq.worker")
    worker.addFilter(refuse)
    try:
        stream.seek(0)
        stream.truncate()
        by_lines(BATCH)
        assert [line.rsplit("outcome=", 1)[1] for line in written(stream)] == ["stale", "done"]
    finally:
        worker.removeFilter(refuse)


def test_a_success_line_below_the_level_is_not_made(stream: io.StringIO) -> None:
    alone()
    logging.getLogger("django_emq").setLevel(logging.WARNING)
    by_lines(BATCH)
    assert [line.split(" ", 1)[0] for line in written(stream)] == ["WARNING"]


@pytest.mark.parametrize(
    "text",
    [b"[20000]", b"[]", b"{}", b'{"a":[1,2,{"b":null}]}', b'"x"', b"1.5", b" [1]", b"[1] ",
     "[1]", b"[1]x", b"[1,", b"nan", b"\xef\xbb\xbf[1]", "\ufeff[1]", b"\xff", b"", None],
)  # fmt: skip
def test_a_rows_json_reads_as_json_loads_reads_it(text: Any) -> None:
    def loads() -> Any:
        if not text:
            return None
        return json.loads(text.decode() if isinstance(text, bytes) else text)

    try:
        expected: Any = loads()
    except ValueError as exc:
        with pytest.raises(type(exc)):
            decode(text)
        return
    assert decode(text) == expected


@pytest.mark.parametrize(
    ("workers", "attempts", "ids"),
    [("w:1", 1, ["w:1"]), ("", 1, ["?"]), ("a,b", 1, ["a", "b"]), ("b", 3, ["?", "?", "b"]),
     ("a,b", 2, ["a", "b"])],
)  # fmt: skip
def test_a_claims_worker_ids_count_its_claims(workers: str, attempts: int, ids: list[str]) -> None:
    assert worker_ids(workers, attempts) == ids

"""The claim scripts' reply (claim-10.lua's header gives its layout), parsed
into :class:`~django_emq.engine.records.Claim` values: one parser, which both
runners use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .payload import decode, text
from .records import Claim, lenient_int
from .rows import worker_ids

#: Entries per job in the claim script's flat reply, and the entries after the
#: last job: the call's deadline, claim time and worker.
CLAIM_STRIDE = 8
CLAIM_TRAILER = 3


def parse_claims(flat: Sequence[Any] | None) -> list[Claim]:
    """The claim script's flat reply, job by job (its layout: claim-10.lua's
    header). The entries after the last job are the call's: what a first
    attempt's compact entry stands for."""
    if not flat:
        return []
    end = len(flat) - CLAIM_TRAILER
    deadline, started, worker = flat[end:]
    return [
        parse_claim(flat[i : i + CLAIM_STRIDE], deadline, started, worker)
        for i in range(0, end, CLAIM_STRIDE)
    ]


def parse_claim(entry: Sequence[Any], deadline: Any, started: Any, worker: Any) -> Claim:
    """One job of the claim script's reply, given the call's deadline, claim
    time and worker (which a first attempt's entry leaves out: its last entry is
    0 then, else the job's own workers, start and expiries). A row edited by
    hand may lack fields or hold unreadable ones: the claim then names its
    ``defect`` instead of raising, so one corrupt row cannot take the worker
    down."""
    job_id, lane, token, task, args, kwargs, enqueued, own = entry
    workers, expiries = worker, 0
    if isinstance(own, list | tuple):
        workers, started, expiries = own
    problems = []
    if task is None or not text(task):
        problems.append("no task path")
    try:
        args = decode(args)
    except ValueError:
        args = None
        problems.append("args are not JSON")
    try:
        kwargs = decode(kwargs)
    except ValueError:
        kwargs = None
        problems.append("kwargs are not JSON")
    if not isinstance(args, list | None):
        problems.append(f"args are a JSON {type(args).__name__}, not a list")
    if not isinstance(kwargs, dict | None):
        problems.append(f"kwargs are a JSON {type(kwargs).__name__}, not an object")
    return Claim(
        job_id=text(job_id),
        lane=text(lane),
        token=int(token),
        task_path="" if task is None else text(task),
        args=args if isinstance(args, list) else [],
        kwargs=kwargs if isinstance(kwargs, dict) else {},
        enqueued_ms=lenient_int(enqueued),
        deadline_ms=int(deadline),
        worker_ids=tuple(worker_ids(text(workers), int(token))),
        started_ms=lenient_int(started),
        expiries=int(expiries),
        defect=f"corrupt job row: {'; '.join(problems)}" if problems else None,
    )

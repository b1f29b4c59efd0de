"""Section 7 of ``bench/run.py``: I/O-bound jobs, the workload fair lanes exist
for (per-user calls to slow APIs, webhooks, mail).

- Async: ``jobs`` coroutine tasks that await ``ms`` each, one
  ``run_emq_worker --burst --concurrency C`` process, next to arq's worker with
  ``max_jobs=C`` on the same jobs and server. Timed from the first job's start
  to the last one's finish: the job rows' own timestamps for django-emq, the
  results arq keeps for arq. The ideal is ``C / ms`` jobs per second.
- Sync: the same with tasks that ``time.sleep``, ``--threads C``, next to
  Dramatiq (1 process x C threads) and Celery (``-P threads -c C``); every job
  records when it ran (one RPUSH), and those records time the run.

Rounds alternate between the queues, so each ratio compares runs made close
together on a machine whose load moves.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from bench.harness import Harness, log, n0, table
from bench.peers.procs import RUNS_KEY, flush, parse_runs


@dataclass(frozen=True)
class IOSizes:
    jobs: int = 5_000
    ms: float = 50.0
    concurrency: int = 500
    rounds: int = 2


def emq_run(bench: Harness, kind: str, s: IOSizes, n: int) -> dict[str, Any]:
    """One django-emq run of ``kind`` (``async`` or ``sync``)."""
    from django_emq.engine.ids import lane_id

    flush(bench.client)
    lanes = [lane_id("USR", pk) for pk in range(1, 101)]
    task = "bench.tasks.io_async" if kind == "async" else "bench.tasks.timed"
    jobs = [
        {"lane": lanes[i % 100], "task_path": task,
         "args": [s.ms] if kind == "async" else [f"j{i}", s.ms]}
        for i in range(s.jobs)
    ]  # fmt: skip
    ids = [e.job_id for e in bench.queue.enqueue_many(jobs)]
    options = ["--burst", "--concurrency", str(s.concurrency)]
    if kind == "sync":
        options += ["--threads", str(s.concurrency)]
    worker = bench.worker(f"io-{kind}-emq-{n}", *options).start()
    code = worker.wait(600)
    worker.stop()
    result: dict[str, Any] = {"peer": "django-emq", "label": " ".join(options[1:]), "exit": code}
    if kind == "async":
        first, last, done = bench.job_span(ids)
        span = (last - first) / 1000
    else:
        runs = parse_runs(bench.client.lrange(RUNS_KEY, 0, -1))  # type: ignore[arg-type]
        done = len(runs)
        span = max(r.end for r in runs) - min(r.start for r in runs) if runs else 0.0
    result["done"] = done
    if done == s.jobs and code == 0 and span > 0:
        result["jobs_per_s"] = round(done / span, 1)
        bench.discard(worker.log_path)
    else:
        result["tail"] = worker.tail()
    return result


def weights(bench: Harness, s: IOSizes) -> dict[str, Any]:
    """Lane A of weight 3 and lane B of weight 1, 150 jobs of ``ms`` each, one
    worker at ``--concurrency 2`` (slow jobs: each claim takes one job): the
    share of A among the first 120 jobs to start (3:1 means 90)."""
    from django_emq.engine.ids import lane_id

    flush(bench.client)
    a, b = lane_id("USR", 1), lane_id("USR", 2)
    jobs = [
        {"lane": lane, "task_path": "bench.tasks.timed", "args": [f"{name}{i}", s.ms]}
        for lane, name in ((a, "a"), (b, "b"))
        for i in range(150)
    ]
    bench.queue.enqueue_many(jobs)
    bench.queue.set_weight(a, 3)
    worker = bench.worker("io-weights", "--burst", "--concurrency", "2").start()
    code = worker.wait(600)
    worker.stop()
    runs = sorted(parse_runs(bench.client.lrange(RUNS_KEY, 0, -1)), key=lambda r: r.start)  # type: ignore[arg-type]
    first = [r.label[0] for r in runs[:120]]
    result: dict[str, Any] = {"exit": code, "a": first.count("a"), "b": first.count("b")}
    result["jobs"] = len(runs)
    if code == 0 and len(runs) == 300:
        bench.discard(worker.log_path)
    else:
        result["tail"] = worker.tail()
    return result


def peer_run(bench: Harness, peer: str, s: IOSizes, n: int) -> dict[str, Any]:
    logfile = bench.logs / f"io-{peer}-{n}.log"
    result = bench.driver(
        "io", peer, "--jobs", str(s.jobs), "--ms", str(s.ms),
        "--threads", str(s.concurrency), "--log", str(logfile),
    )  # fmt: skip
    if "jobs_per_s" in result:
        bench.discard(logfile)
    return result


def section(bench: Harness, s: IOSizes) -> dict[str, Any]:
    """Every round of both tables; the best round of each queue counts."""
    tables: dict[str, dict[str, list[dict[str, Any]]]] = {"async": {}, "sync": {}}
    peers = {"async": ["arq"], "sync": ["dramatiq", "celery"]} if bench.peers else {}
    for n in range(s.rounds):
        for kind in ("async", "sync"):
            log(f"io round {n + 1}/{s.rounds}: {kind}, django-emq")
            runs = tables[kind].setdefault("django-emq", [])
            runs.append(emq_run(bench, kind, s, n))
            log(f"  {runs[-1].get('jobs_per_s', 'failed')} jobs/s")
            for peer in peers.get(kind, []):
                log(f"io round {n + 1}/{s.rounds}: {kind}, {peer}")
                runs = tables[kind].setdefault(peer, [])
                runs.append(peer_run(bench, peer, s, n))
                log(f"  {runs[-1].get('jobs_per_s', runs[-1].get('error', 'failed'))} jobs/s")
    log("io: weights 3:1 with slow jobs, django-emq")
    out: dict[str, Any] = {
        "sizes": asdict(s),
        "ideal_jobs_per_s": s.concurrency / s.ms * 1000,
        "weights": weights(bench, s),
    }
    for kind, queues in tables.items():
        out[kind] = [_best(runs) for runs in queues.values()]
    return out


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A queue's best round, with every round's figure."""
    top = max(runs, key=lambda r: float(r.get("jobs_per_s", 0)))
    return {**top, "rounds_jobs_per_s": [r.get("jobs_per_s") for r in runs]}


def report(r: dict[str, Any]) -> list[str]:
    io = r["io"]
    s = io["sizes"]
    out = []
    for kind, what in (("async", "coroutine jobs that await"), ("sync", "jobs that sleep")):
        rows = [
            [_name(x), x.get("label", ""),
             n0(x.get("jobs_per_s")) if "jobs_per_s" in x else f"failed: {x.get('error', '')}",
             ", ".join(n0(v) for v in x["rounds_jobs_per_s"] if v is not None)]
            for x in io[kind]
        ]  # fmt: skip
        out += [
            "",
            f"### 7{'ab'[kind == 'sync']}. I/O: {s['jobs']:,} {what} {s['ms']:g} ms, "
            f"{s['concurrency']} at once, one process",
            "",
            table(["queue", "worker", "jobs/s (best round)", "rounds"], rows, "llrr"),
        ]
    w = io["weights"]
    out += [
        "",
        f"Ideal: {n0(io['ideal_jobs_per_s'])} jobs/s ({s['concurrency']} at once, "
        f"{s['ms']:g} ms each). Rounds alternate between the queues.",
        "",
        f"Weights with slow jobs: lanes of weight 3 and 1, 150 jobs of {s['ms']:g} ms each, "
        f"one worker at `--concurrency 2`: the first 120 jobs to start were {w['a']} of "
        f"the heavy lane and {w['b']} of the other.",
    ]
    return out


def _name(x: dict[str, Any]) -> str:
    return "**django-emq**" if x["peer"] == "django-emq" else f"{x['peer']} {x.get('version', '')}"


def targets(r: dict[str, Any], add: Any) -> None:
    io = r.get("io")
    if not io:
        return
    w = io["weights"]
    ratio = w["a"] / max(1, w["b"])
    add(
        "weights 3:1 (+-15%) with 50 ms jobs, one real worker",
        2.55 <= ratio <= 3.45,
        f"{w['a']}:{w['b']} among the first 120 = {ratio:.2f}:1",
    )
    by = {x["peer"]: x for x in io["async"] if "jobs_per_s" in x}
    ours = by.get("django-emq")
    if ours is None:
        return
    ideal = io["ideal_jobs_per_s"]
    share = ours["jobs_per_s"] / ideal
    add(
        "async I/O: >= 50% of the ideal",
        share >= 0.5,
        f"{n0(ours['jobs_per_s'])} jobs/s vs {n0(ideal)} = {share:.0%}",
    )
    arq = by.get("arq")
    if arq is not None:
        ratio = ours["jobs_per_s"] / arq["jobs_per_s"]
        add(
            "async I/O: >= 2x arq",
            ratio >= 2,
            f"{n0(ours['jobs_per_s'])} vs arq {arq['label']} {n0(arq['jobs_per_s'])} jobs/s "
            f"= {ratio:.2f}x",
        )

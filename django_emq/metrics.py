"""The figures of every configured queue for machines: the Prometheus text
format (``metrics/``) and JSON (``stats/``), both served by
:mod:`django_emq.urls`.

Per queue: jobs pending, in flight, scheduled and dead, lanes with work,
ring length, the monotonic counters the scripts keep (enqueued, completed,
dead, retried, cancelled, drained, reaped), the wait from when a job became due
(its enqueue, or its ``run_after``) to its first start at p50 and p95 over
the last five minutes, the 20 deepest lanes' depth, the p95 wait of the
lanes :func:`~django_emq.engine.history.window_lanes` picks (the same as
the fairness chart's), and every worker's last heartbeat. A fixed number of
round trips per queue whatever the jobs, and a bounded number whatever the
lanes.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse

from .backend import configured_queues
from .conf import emq_settings
from .engine import browse, history
from .engine.exceptions import CorruptKeyspace
from .engine.history import read_count
from .engine.payload import text
from .engine.shards import AnyQueue

#: Lanes whose depth is exported per queue.
TOP_LANES = 20
#: Minutes the exported wait percentiles cover.
WAIT_MINUTES = 5
#: The monotonic counters of a queue's ``stats`` hash that are exported.
COUNTERS = (
    "enqueued", "completed", "dead", "retried", "cancelled", "drained", "reaped", "revived",
)  # fmt: skip


def allowed(request: HttpRequest) -> bool:
    """A bearer token equal to ``EMQ["METRICS_TOKEN"]``, or a user with
    ``django_emq.view_lanes`` (or ``manage_lanes``)."""
    token = emq_settings().metrics_token
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())
    user = getattr(request, "user", None)
    return bool(
        user is not None
        and (user.has_perm("django_emq.view_lanes") or user.has_perm("django_emq.manage_lanes"))
    )


def _counters(queue: AnyQueue) -> dict[str, int]:
    totals: dict[str, int] = dict.fromkeys(COUNTERS, 0)
    for shard in queue.shards:
        raw = shard.connection.hmget(shard.keys.stats, list(COUNTERS))
        for name, value in zip(COUNTERS, raw, strict=True):
            totals[name] += read_count(value)  # a hand-edited count reads as 0
    return totals


def queue_stats(name: str, queue: AnyQueue) -> dict[str, Any]:
    """Everything exported about one queue, as plain values."""
    totals = queue.totals()
    view = browse.overview(queue, 1)
    minutes = history.series(queue, step_minutes=1, count=WAIT_MINUTES, now_ms=view.server_ms)
    waits = history.merged(m.waits for m in minutes)
    lanes = queue.lanes(top=TOP_LANES)
    window = history.window_lanes(queue, view.server_ms)
    p50, p95 = history.percentile(waits, 0.5), history.percentile(waits, 0.95)
    return {
        "queue": name,
        "pending": totals.pending,
        "inflight": totals.active,
        "scheduled": totals.scheduled,
        "dead": totals.dead,
        "lanes": totals.lanes,
        "ring": totals.ring,
        "counters": _counters(queue),
        "wait_p50_seconds": None if p50 is None else p50 / 1000,
        "wait_p95_seconds": None if p95 is None else p95 / 1000,
        "lanes_top": [
            {"lane": info.lane, "depth": info.depth, "inflight": info.inflight} for info in lanes
        ],
        "lanes_waits": [
            {
                "lane": w.lane,
                "started": w.started,
                "wait_p95_seconds": None if (p := w.p95_ms()) is None else p / 1000,
            }
            for w in window.lanes
        ],
        "lanes_waits_partial": window.partial,
        "workers": [
            {
                "worker": beat.worker_id,
                "host": beat.host,
                "done": beat.done,
                "running": beat.running,
                "last_beat_seconds_ago": (
                    None if beat.beat_ms is None else (view.server_ms - beat.beat_ms) / 1000
                ),
            }
            for beat in view.workers
            if beat.stopped_ms is None  # a stopped worker's last record: not a silent one
        ],
    }


def all_stats() -> list[dict[str, Any]]:
    return [queue_stats(name, b.engine(name)) for name, b in configured_queues().items()]


def _label(value: Any) -> str:
    return text(str(value)).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def prometheus(stats: list[dict[str, Any]]) -> Iterator[str]:
    """The Prometheus text exposition (version 0.0.4) of ``stats``."""
    gauges = {
        "pending": "Jobs waiting in lanes.",
        "inflight": "Jobs claimed by workers.",
        "scheduled": "Jobs deferred or backing off.",
        "dead": "Jobs that used up their attempts.",
        "lanes": "Lanes with pending jobs.",
        "ring": "Lanes in rotation.",
    }
    for key, help_text in gauges.items():
        yield f"# HELP emq_{key} {help_text}\n# TYPE emq_{key} gauge\n"
        for s in stats:
            yield f'emq_{key}{{queue="{_label(s["queue"])}"}} {s[key]}\n'
    yield "# HELP emq_jobs_total Jobs by event since the queue was created.\n"
    yield "# TYPE emq_jobs_total counter\n"
    for s in stats:
        for event, value in s["counters"].items():
            yield f'emq_jobs_total{{queue="{_label(s["queue"])}",event="{event}"}} {value}\n'
    yield (
        "# HELP emq_wait_seconds Wait from due (enqueue or run_after) to first start, "
        f"last {WAIT_MINUTES} minutes (from log-spaced buckets).\n"
        "# TYPE emq_wait_seconds gauge\n"
    )
    for s in stats:
        for q, key in (("0.5", "wait_p50_seconds"), ("0.95", "wait_p95_seconds")):
            if s[key] is not None:
                q_label = f'queue="{_label(s["queue"])}",quantile="{q}"'
                yield f"emq_wait_seconds{{{q_label}}} {s[key]:g}\n"
    yield (
        "# HELP emq_lane_depth Pending jobs of the deepest lanes.\n# TYPE emq_lane_depth gauge\n"
    )
    for s in stats:
        for lane in s["lanes_top"]:
            labels = f'queue="{_label(s["queue"])}",lane="{lane["lane"]}"'
            yield f"emq_lane_depth{{{labels}}} {lane['depth']}\n"
    yield (
        "# HELP emq_lane_wait_p95_seconds p95 wait, last two hours, of the lanes that "
        "started the most jobs or waited longest.\n"
        "# TYPE emq_lane_wait_p95_seconds gauge\n"
    )
    for s in stats:
        for lane in s["lanes_waits"]:
            if lane["wait_p95_seconds"] is not None:
                yield (
                    f'emq_lane_wait_p95_seconds{{queue="{_label(s["queue"])}",'
                    f'lane="{lane["lane"]}"}} {lane["wait_p95_seconds"]:g}\n'
                )
    yield (
        "# HELP emq_worker_last_beat_seconds Seconds since each worker's last heartbeat.\n"
        "# TYPE emq_worker_last_beat_seconds gauge\n"
    )
    for s in stats:
        for worker in s["workers"]:
            if worker["last_beat_seconds_ago"] is not None:
                yield (
                    f'emq_worker_last_beat_seconds{{queue="{_label(s["queue"])}",'
                    f'worker="{_label(worker["worker"])}"}} {worker["last_beat_seconds_ago"]:g}\n'
                )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``metrics/``: the Prometheus text format. A damaged key that every figure
    depends on (the registry of queue names of a ``QUEUES: []`` backend) answers
    503 naming it, so the scrape fails visibly instead of with a server error."""
    if not allowed(request):
        return HttpResponseForbidden("django_emq.view_lanes or the EMQ METRICS_TOKEN is needed\n")
    try:
        body = "".join(prometheus(all_stats()))
    except CorruptKeyspace as exc:
        return HttpResponse(f"{exc}\n", status=503, content_type="text/plain; charset=utf-8")
    return HttpResponse(body, content_type="text/plain; version=0.0.4; charset=utf-8")


def stats_view(request: HttpRequest) -> HttpResponse:
    """``stats/``: the same figures as JSON, for scripts (503 as ``metrics/``)."""
    if not allowed(request):
        return JsonResponse({"error": "forbidden"}, status=403)
    try:
        return JsonResponse({"queues": all_stats()})
    except CorruptKeyspace as exc:
        return JsonResponse({"error": str(exc)}, status=503)

"""The charts page of a queue: jobs enqueued, finished and failed and the wait
from due (enqueue, or ``run_after``) to first start (p50, p95) for the last
hour per minute and the last day per 15 minutes, and the p95 wait of the
window's heaviest and worst-waiting lanes (:func:`~django_emq.engine.history.window_lanes`)
next to the queue's. Read from the queue's history
(:mod:`django_emq.engine.history`): a fixed number of round trips whatever
the jobs, and a bounded number whatever the lanes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..engine import history
from .base import ConsoleAdmin
from .svg import Line, bar_chart, line_chart


def _label(ms: int) -> str:
    moment = timezone.localtime(datetime.fromtimestamp(ms / 1000, tz=UTC))
    return moment.strftime("%H:%M")


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else round(ms / 1000, 3)


def _merged(minutes: list[history.Interval], step: int) -> list[history.Interval]:
    out = []
    for i in range(0, len(minutes), step):
        interval = history.Interval(minutes[i].start_ms)
        for minute in minutes[i : i + step]:
            interval.add({**minute.counts, **{f"w{b}": n for b, n in minute.waits.items()}})
        out.append(interval)
    return out


def charts_for(intervals: list[history.Interval], span: str) -> list[Any]:
    """The throughput and the wait charts of one span of intervals."""
    labels = [_label(i.start_ms) for i in intervals]
    throughput = line_chart(
        _("Jobs per interval, %(span)s") % {"span": span},
        [
            Line(_("enqueued"), "emq-s1", [float(i.count("enq")) for i in intervals]),
            Line(_("finished"), "emq-s2", [float(i.count("done")) for i in intervals]),
            Line(_("failed"), "emq-s3", [float(i.count("dead")) for i in intervals]),
        ],
        labels,
        _("jobs"),
    )
    waits = line_chart(
        _("Wait from due to first start, %(span)s") % {"span": span},
        [
            Line(_("p50"), "emq-s1", [_seconds(i.wait_ms(0.5)) for i in intervals]),
            Line(_("p95"), "emq-s3", [_seconds(i.wait_ms(0.95)) for i in intervals]),
        ],
        labels,
        _("s"),
    )
    return [throughput, waits]


class ChartViews(ConsoleAdmin):
    """``charts_view``; the admin supplies the rest."""

    def charts_view(self, request: HttpRequest, queue_name: str) -> HttpResponse:
        """The queue's charts (the page refreshes itself each minute)."""
        self._require_view(request)
        queue = self._queue(queue_name)
        seconds, micros = queue.shards[0].connection.time()
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        day = history.series(queue, step_minutes=1, count=24 * 60, now_ms=now_ms)
        hour = day[-60:]
        window = history.window_lanes(queue, now_ms)
        overall = history.percentile(history.merged(w.waits for w in window.lanes), 0.95)
        queue_p95 = history.percentile(history.merged(i.waits for i in hour), 0.95)
        title = ngettext(
            "p95 wait of the %(n)d lane that started the most jobs or waited longest, "
            "last two hours; the line: the queue's p95, last hour",
            "p95 wait of the %(n)d lanes that started the most jobs or waited longest, "
            "last two hours; the line: the queue's p95, last hour",
            len(window.lanes),
        ) % {"n": len(window.lanes)}
        if window.partial:
            title += " " + _("(from %(read)d of %(total)d lane counts: the rest were not read)") % {
                "read": window.fields_read,
                "total": window.fields_total,
            }
        lanes_chart = bar_chart(
            title,
            [(w.lane, _seconds(w.p95_ms())) for w in window.lanes],
            _seconds(queue_p95 if queue_p95 is not None else overall),
            _("s"),
            empty=_("No lane started a job in the last two hours: nothing to compare."),
        )
        context = self._context(
            request,
            _("Charts of queue %(name)s") % {"name": queue.name},
            queue=queue.name,
            hour_charts=charts_for(hour, _("last hour, per minute")),
            day_charts=charts_for(_merged(day, 15), _("last day, per 15 minutes")),
            lanes_chart=lanes_chart,
            points=sum(1 for i in hour if i.counts or i.waits),
            list_url=self._url("changelist") + "?" + urlencode({"queue": queue.name}),
        )
        return TemplateResponse(request, "admin/django_emq/charts.html", context)

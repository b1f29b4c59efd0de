"""The admin's workers page: every worker that reported, per queue, with the
jobs it holds, and whether it stopped; and *Stop after current jobs*, which
asks a worker (engine/worker_control.py) to wind down as on SIGTERM. A POST
with CSRF and ``django_emq.manage_lanes``: the first POST shows a
confirmation page, the confirmed one asks; a GET changes nothing."""

from __future__ import annotations

from django.contrib import messages
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from ..engine import browse, listing
from ..engine.records import WORKER_ID_RE
from ..engine.worker_control import ask_to_stop, incarnation, stops_asked
from .base import ConsoleAdmin
from .display import duration, moment, worker_alive
from .lookup import configured_queues

#: Longest worker id the view takes (ids are ``host:pid`` or ``--worker-id``).
MAX_WORKER_ID = 200


class WorkerActionViews(ConsoleAdmin):
    """``workers_view`` and ``worker_stop_view``; the admin supplies the rest."""

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        """Every worker that beat recently, per queue, with the jobs it holds now."""
        self._require_view(request)
        sections = []
        for name, backend in configured_queues().items():
            queue = backend.engine(name)
            view = browse.overview(queue, 1)
            asked = stops_asked(queue)
            held = listing.jobs_in_state(queue, "inflight", 0, listing.MAX_PAGE)
            by_worker: dict[str, list[dict[str, str]]] = {}
            for listed in held.jobs:
                by_worker.setdefault(listed.row.worker, []).append(
                    {
                        "id": listed.row.job_id,
                        "task": listed.row.task_path,
                        "url": self._url("detail", name, listed.row.job_id),
                    }
                )
            sections.append(
                {
                    "queue": name,
                    "workers": [
                        {
                            "beat": beat,
                            "last_beat": moment(beat.beat_ms),
                            "ago": duration(view.server_ms - (beat.beat_ms or 0)),
                            "alive": beat.stopped_ms is None
                            and worker_alive(beat.beat_ms, view.server_ms),
                            "stopped": moment(beat.stopped_ms),
                            "stop_asked": beat.worker_id in asked
                            and asked[beat.worker_id].applies_to(
                                incarnation(beat.started_ms, beat.pid)
                            ),
                            # an id a hand edit left in the hash: listed, never stopped
                            "stop_url": self._url("worker_stop", name, beat.worker_id)
                            if WORKER_ID_RE.fullmatch(beat.worker_id)
                            else "",
                            "jobs": by_worker.get(beat.worker_id, []),
                            "uptime": (
                                None
                                if beat.started_ms is None or beat.beat_ms is None
                                else duration(beat.beat_ms - beat.started_ms)
                            ),
                        }
                        for beat in view.workers
                    ],
                    "held_more": max(0, held.total - len(held.jobs)),
                }
            )
        context = self._context(request, _("Workers"), sections=sections)
        return TemplateResponse(request, "admin/django_emq/workers.html", context)

    def worker_stop_view(
        self, request: HttpRequest, queue_name: str, worker_id: str
    ) -> HttpResponseBase:
        """Ask one worker of a queue to stop after its current jobs."""
        if (refused := self.refuse_unless_managing(request)) is not None:
            return refused
        queue = self._queue(queue_name)
        back = self._url("workers")
        worker_id = worker_id[:MAX_WORKER_ID]
        if request.POST.get("confirmed") != "yes":
            context = self._context(
                request,
                _("Are you sure?"),
                queue=queue.name,
                action="stop-worker",
                worker_id=worker_id,
                fields={},
                ids=[],
                back=back,
                list_url=self._url("changelist"),
            )
            return TemplateResponse(request, "admin/django_emq/bulk_confirm.html", context)
        values = {"worker": worker_id, "queue": queue.name}
        if ask_to_stop(queue, worker_id):
            messages.success(
                request,
                _(
                    "Worker %(worker)s was asked to stop: at its next beat it takes no new "
                    "job, finishes the ones it runs and exits, as on SIGTERM."
                )
                % values,
            )
        else:
            messages.warning(
                request,
                _("No running worker %(worker)s reports to queue %(queue)s. Nothing was changed.")
                % values,
            )
        return HttpResponseRedirect(back)

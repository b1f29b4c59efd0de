"""The admin's jobs pages: every queue's jobs by state (the next to run,
scheduled, running, dead, recently finished), search, one page per job, the
workers, and the charts.

Like the lanes view these read Valkey only, need ``django_emq.view_lanes`` to
see and ``django_emq.manage_lanes`` to act, change nothing on GET, and cost a
fixed number of round trips per page whatever the number of lanes or jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..engine import browse, listing
from ..engine.ids import validate_job_id, validate_lane
from ..engine.shards import AnyQueue
from ..exceptions import JobNotFound
from ..models import Job
from .bulk_actions import BulkActionViews
from .charts import ChartViews
from .display import Pager, duration, error_message, moment, split_error, state_word
from .job_actions import JobActionViews
from .job_detail import job_facts
from .lookup import configured_queues, lane_links, lanes_named_by
from .worker_actions import WorkerActionViews

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin[Job]
else:  # ModelAdmin is generic for the type checker only
    ModelAdmin = admin.ModelAdmin

STATE_TITLES = {
    "pending": gettext_lazy("Next to run"),
    "scheduled": gettext_lazy("Scheduled"),
    "inflight": gettext_lazy("Running"),
    "dead": gettext_lazy("Dead"),
    "finished": gettext_lazy("Recently finished"),
}


def _one_task(found: list[listing.ListedJob]) -> str | None:
    """The task path every job a search found shares, if there is one: a search
    for part of a path (``resize``) offers the whole path to the bulk actions,
    which take nothing less."""
    paths = {listed.row.task_path for listed in found}
    return paths.pop() if len(paths) == 1 else None


def _search_window() -> str:
    """Which jobs a task search reads, in words (from the engine's window)."""
    window = listing.SEARCH_WINDOW
    return _(
        "the latest %(finished)s finished jobs and up to %(dead)s dead, "
        "%(scheduled)s scheduled and %(running)s running ones; pending jobs are "
        "found by their lane"
    ) % {
        "finished": f"{window['finished']:,}",
        "dead": f"{window['dead']:,}",
        "scheduled": f"{window['scheduled']:,}",
        "running": f"{window['inflight']:,}",
    }


@admin.register(Job)
class JobAdmin(JobActionViews, BulkActionViews, WorkerActionViews, ChartViews):
    """Jobs of every configured queue, read from Valkey."""

    #: Jobs per page of a listing.
    jobs_per_page = 50
    #: Most users a search by username or email may find.
    search_limit = 20
    #: Pages a task search goes to: the rows it reads grow with the page (the
    #: round trips do not), so they stop here.
    search_pages = 20

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    # -- URLs ------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self._wrap
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("", wrap(self.changelist_view), name=f"{name}_changelist"),
            path("workers/", wrap(self.workers_view), name=f"{name}_workers"),
            path(
                "workers/<str:queue_name>/<str:worker_id>/stop/",
                wrap(self.worker_stop_view),
                name=f"{name}_worker_stop",
            ),
            path("charts/<str:queue_name>/", wrap(self.charts_view), name=f"{name}_charts"),
            path(
                "<str:queue_name>/dead-jobs/<slug:action>/",
                wrap(self.dead_action_view),
                name=f"{name}_dead",
            ),
            path(
                "<str:queue_name>/bulk/<slug:action>/",
                wrap(self.bulk_action_view),
                name=f"{name}_bulk",
            ),
            path("<str:queue_name>/<str:job_id>/", wrap(self.job_view), name=f"{name}_detail"),
            path(
                "<str:queue_name>/<str:job_id>/<slug:action>/",
                wrap(self.job_action_view),
                name=f"{name}_action",
            ),
        ]

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return super()._context(
            request,
            title,
            jobs_url=self._url("changelist"),
            workers_url=self._url("workers"),
            **extra,
        )

    def _lane_url(self, queue: str, lane: str) -> str:
        """The lane's page; empty for a name that is no lane (a row edited by
        hand), which is shown unlinked."""
        try:
            validate_lane(lane)
        except ValueError:
            return ""
        return reverse(
            "admin:django_emq_lane_detail", args=[queue, lane], current_app=self.admin_site.name
        )

    # -- shared ------------------------------------------------------------------

    # -- jobs by state -----------------------------------------------------------

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """One queue's jobs in one state, a page at a time, or what a search finds."""
        self._require_view(request)
        backends = configured_queues()
        if not backends:
            context = self._context(request, _("Jobs"), queues=[])
            return TemplateResponse(request, "admin/django_emq/jobs.html", context)
        name = request.GET.get("queue") or next(iter(backends))
        queue = self._queue(name)
        state = request.GET.get("state", "pending")
        if state not in STATE_TITLES:
            raise Http404(_("No job state %(state)s.") % {"state": state})
        query = request.GET.get("q", "").strip()
        search: dict[str, Any] | None = None
        if query:
            per = self.jobs_per_page
            number = min(Pager.requested(request.GET.get("page")), self.search_pages)
            found = self._search(queue, query, number * per + 1)  # one more: are there more?
            if isinstance(found, str):
                return redirect(found)
            # a page past the hits (a stale link, jobs expired since): the last page
            number = max(1, min(number, -(-len(found) // per)))
            shown = found[(number - 1) * per : number * per]
            more = len(found) > number * per and number < self.search_pages
            search = {
                "first": (number - 1) * per + 1 if shown else 0,
                "last": (number - 1) * per + len(shown),
                "total": None if len(found) > number * per else len(found),
                "window": _search_window(),
                # the bulk forms' task: the one task path found, else what was typed
                "task": _one_task(found) or query,
                "urls": {
                    key: "?" + urlencode({"queue": name, "q": query, "page": str(n)})
                    for key, n in (("previous", number - 1), ("next", number + 1))
                    if (key == "previous" and n >= 1) or (key == "next" and more)
                },
            }
            page = listing.Listing(shown, len(shown), 0)
            pager = None
        else:
            per = self.jobs_per_page
            number = 1 if state == "pending" else Pager.requested(request.GET.get("page"))
            page = listing.jobs_in_state(queue, state, (number - 1) * per, per)  # type: ignore[arg-type]
            pager = Pager(number, page.total if state != "pending" else len(page.jobs), per)
        totals = queue.totals()
        context = self._context(
            request,
            _("Jobs"),
            queue=name,
            queues=[
                {"name": n, "url": "?" + urlencode({"queue": n}), "selected": n == name}
                for n in backends
            ],
            state=state,
            tabs=[
                {
                    "state": s,
                    "title": title,
                    "count": {
                        "pending": totals.pending,
                        "scheduled": totals.scheduled,
                        "inflight": totals.active,
                        "dead": totals.dead,
                    }.get(s),
                    "url": "?" + urlencode({"queue": name, "state": s}),
                    "selected": s == state and not query,
                }
                for s, title in STATE_TITLES.items()
            ],
            rows=self._rows(name, page),
            total=page.total,
            pager=pager,
            page_urls=self._page_urls(name, state, pager),
            query=query,
            search=search,
            bulk_urls={
                action.replace("-", "_"): self._url("bulk", name, action) for action in self.BULK
            },
            dead_url=self._url("dead", name, "retry"),
            delete_url=self._url("dead", name, "delete"),
            charts_url=self._url("charts", name),
            here=request.get_full_path(),
            **(extra_context or {}),
        )
        return TemplateResponse(request, "admin/django_emq/jobs.html", context)

    def _search(self, queue: AnyQueue, query: str, limit: int) -> str | list[listing.ListedJob]:
        """Where a search leads: a job's page (by its id), a lane's page (by its id
        or its user's username or email), or the first ``limit`` jobs whose task
        path holds the query anywhere, in any case (the same round trips whatever
        ``limit``)."""
        try:
            job_id = validate_job_id(query)
            if queue.job(job_id) is not None:
                return self._url("detail", queue.name, job_id)
        except (ValueError, JobNotFound):
            pass
        lanes = lanes_named_by(query, self.search_limit)
        if lanes:
            return self._lane_url(queue.name, lanes[0])
        return listing.find_by_task(queue, query, limit)

    def _rows(self, queue: str, page: listing.Listing) -> list[dict[str, Any]]:
        rows = []
        for listed in page.jobs:
            job = listed.row
            error_class, traceback = split_error(job.error)
            rows.append(
                {
                    "job": job,
                    "state_word": state_word(job.state),
                    "url": self._url("detail", queue, job.job_id),
                    "lane_url": self._lane_url(queue, job.lane) if job.lane else "",
                    "enqueued": moment(job.enqueued_ms),
                    "due": moment(listed.score) if job.state == "scheduled" else None,
                    "claimed": moment(job.claimed_ms),
                    "finished": moment(job.finished_ms),
                    "lease_left": (
                        None
                        if job.deadline_ms is None or not page.server_ms
                        else duration(job.deadline_ms - page.server_ms)
                    ),
                    "lease_expired": job.deadline_ms is not None
                    and bool(page.server_ms)
                    and job.deadline_ms <= page.server_ms,
                    "error_class": error_class,
                    "error_line": error_message(error_class, traceback),
                }
            )
        return rows

    def _page_urls(self, queue: str, state: str, pager: Pager | None) -> dict[str, str]:
        urls: dict[str, str] = {}
        if pager is None or state == "pending":
            return urls
        for key, number in (("previous", pager.previous), ("next", pager.next)):
            if number is not None:
                urls[key] = "?" + urlencode({"queue": queue, "state": state, "page": str(number)})
        return urls

    # -- one job -----------------------------------------------------------------

    def job_view(self, request: HttpRequest, queue_name: str, job_id: str) -> HttpResponse:
        """Everything about one job, and the actions its state allows."""
        self._require_view(request)
        queue = self._queue(queue_name)
        try:
            shard = queue.shard_for_job(validate_job_id(job_id))
        except (ValueError, JobNotFound):
            raise Http404(_("No job %(id)s.") % {"id": job_id[:40]}) from None
        found = browse.read_job(shard, job_id)  # one round trip
        if found is None:
            raise Http404(
                _("No job %(id)s: never enqueued, or its result expired.") % {"id": job_id}
            )
        facts = job_facts(found.row, found.server_ms, found.beats, found.deadline_ms)
        owner = (
            lane_links([facts["lane"]], self.admin_site).get(facts["lane"])
            if facts["lane"]
            else None
        )
        context = self._context(
            request,
            _("Job %(id)s") % {"id": job_id},
            queue=queue.name,
            shard=shard.name,
            job_id=job_id,
            job=facts,
            owner=owner,
            lane_url=self._lane_url(queue.name, facts["lane"]) if facts["lane"] else "",
            worker_anchor=f"worker-{queue.name}-",
            **self._refresh(request, facts["state"] == "active"),
            list_url=self._url("changelist") + "?" + urlencode({"queue": queue.name}),
            action_urls={  # run-now -> run_now: templates cannot look up dashes
                name.replace("-", "_"): self._url("action", queue.name, job_id, name)
                for name in ("cancel", "run-now", "retry", "move", "run-again")
            },
            bulk_urls={
                action.replace("-", "_"): self._url("bulk", queue.name, action)
                for action in self.BULK
            },
            here=request.get_full_path(),
        )
        return TemplateResponse(request, "admin/django_emq/job.html", context)

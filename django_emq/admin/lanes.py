"""The admin's lane view: queue overview, deepest lanes, lane detail, lane actions.

Lanes live in Valkey, so the ``Lane`` model has no table; its admin replaces
the usual URLs with the views below, each wrapped by ``admin_site.admin_view``.
Seeing needs ``django_emq.view_lanes``, acting ``django_emq.manage_lanes``.
Nothing changes on GET. Every page costs a bounded number of round trips,
whatever the number of lanes: lanes are read by rank from the depth index
or by name, never by scanning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from ..conf import emq_settings
from ..engine import browse, listing
from ..engine.ids import entry_tenant, is_lane, validate_lane, validate_tenant
from ..engine.lane_filters import FILTERS, Which
from ..engine.queue import LaneInfo
from ..engine.shards import AnyQueue, home_of
from ..models import Lane
from ..schedules import describe
from .action_views import ActionViews
from .actions import ACTIONS
from .display import (
    TRACEBACK_SHOWN,
    Pager,
    cut_traceback,
    duration,
    error_message,
    moment,
    split_error,
)
from .lane_lists import SORTS, pick_lanes, search_lanes
from .lookup import configured_queues, lane_owners

if TYPE_CHECKING:
    ModelAdmin = admin.ModelAdmin[Lane]
else:  # ModelAdmin is generic for the type checker only
    ModelAdmin = admin.ModelAdmin


@admin.register(Lane)
class LaneAdmin(ActionViews):
    """The lanes of every configured queue, read from Valkey."""

    #: Lanes per page of the deepest-lanes list.
    lanes_per_page = 50
    #: Jobs per page of each listing of the lane detail.
    jobs_per_page = 25
    #: How many of the next lanes in rotation the overview names.
    ring_preview = 10
    #: Seconds between the lane list's automatic refreshes.
    refresh_seconds = 5
    #: Workers whose last beat is older than this are counted, not listed.
    recent_worker_seconds = 60
    #: Most users one search may find.
    search_limit = 20

    # -- URLs ------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        wrap = self._wrap
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("", wrap(self.changelist_view), name=f"{name}_changelist"),
            path("<str:queue_name>/<str:lane>/", wrap(self.lane_view), name=f"{name}_detail"),
            path(
                "<str:queue_name>/<str:lane>/<slug:action>/",
                wrap(self.action_view),
                name=f"{name}_action",
            ),
        ]

    # -- shared ------------------------------------------------------------------

    @staticmethod
    def _lane(lane: str) -> str:
        try:
            return validate_lane(lane)
        except ValueError:
            raise Http404(_("%(lane)r is not a lane id.") % {"lane": lane[:40]}) from None

    # -- the lane list ---------------------------------------------------------

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Every queue's totals; for one queue the ring's head, the workers and the
        deepest lanes (or the lanes a search finds)."""
        self._require_view(request)
        backends = configured_queues()
        if not backends:
            context = self._context(request, _("Lanes"), queues=[])
            return TemplateResponse(request, "admin/django_emq/lanes.html", context)
        name = request.GET.get("queue") or next(iter(backends))
        if name not in backends:
            raise Http404(_("No queue named %(name)s.") % {"name": name})
        queue = backends[name].engine(name)
        totals = {n: (queue if n == name else b.engine(n)).totals() for n, b in backends.items()}
        view = browse.overview(queue, self.ring_preview)
        query = request.GET.get("q", "").strip()
        tenant = _tenant_arg(request.GET.get("tenant"))
        sort = str(request.GET.get("sort")) if request.GET.get("sort") in SORTS else "depth"
        which = request.GET.get("filter") if request.GET.get("filter") in FILTERS else None
        which = cast("Which | None", which)
        sampled = False
        pager = None
        filtered = None
        if tenant:  # a tenant's lanes, deepest first (a scan of the lane -> tenant hash)
            named = queue.lanes_named(queue.tenant_lanes(tenant, self.lanes_per_page))
            infos = sorted(named, key=lambda info: -info.depth)
        elif query:
            infos = search_lanes(queue, query, self.search_limit)
        else:
            picked = pick_lanes(
                queue, request.GET.get("page"), sort, which, self.lanes_per_page, totals[name].lanes
            )
            infos, pager, sampled, filtered = (
                picked.infos, picked.pager, picked.sampled, picked.filtered,
            )  # fmt: skip
        # names a hand edit left where lanes belong: shown, never linked
        damaged = [lane for lane in view.ring_head if not (is_lane(lane) or entry_tenant(lane))]
        damaged += [info.lane for info in infos if not is_lane(info.lane)]
        infos = [info for info in infos if is_lane(info.lane)]
        rows = self._lane_rows(queue, infos, view.deepest, view.server_ms)
        if sort == "oldest":  # the page's lanes, the longest waiting first
            rows.sort(key=lambda row: (row["oldest_ms"] is None, row["oldest_ms"] or 0))
        refresh = request.GET.get("refresh") != "0" and not query
        recent_ms = self.recent_worker_seconds * 1000
        workers = [
            w
            for w in view.workers
            if w.beat_ms and view.server_ms - w.beat_ms <= recent_ms and w.stopped_ms is None
        ]
        context = self._context(
            request,
            _("Lanes"),
            queue=name,
            queues=[
                {
                    "name": n,
                    "totals": t,
                    "selected": n == name,
                    "url": self._query_url(request, queue=n, page=None, q=None),
                    "jobs_url": reverse(
                        "admin:django_emq_job_changelist", current_app=self.admin_site.name
                    )
                    + "?"
                    + urlencode({"queue": n}),
                }
                for n, t in totals.items()
            ],
            totals=totals[name],
            ring_head=[
                {"lane": lane, "url": self._ring_url(request, name, lane)}
                for lane in view.ring_head
            ],
            tenant=tenant,
            tenant_info=queue.tenant(tenant) if tenant else None,
            tenants=queue.tenants()[:200] if request.GET.get("tenants") == "1" else None,
            tenants_url=self._query_url(request, tenants="1", tenant=None, q=None, page=None),
            damaged=damaged,
            ring_more=max(0, totals[name].ring - len(view.ring_head)),
            workers=[
                {
                    "beat": w,
                    "last_beat": moment(w.beat_ms),
                    "ago": duration(view.server_ms - (w.beat_ms or 0)),
                }
                for w in workers
            ],
            stale_workers=len(view.workers) - len(workers),
            recent_worker_seconds=self.recent_worker_seconds,
            lanes=rows,
            sort=sort,
            sorts_shown=not (tenant or query or which),
            filter=which,
            filtered=filtered,
            filter_urls={
                f: self._query_url(request, filter=f, page=None, sort=None, q=None) for f in FILTERS
            }
            | {"all": self._query_url(request, filter=None, page=None, sort=None)},
            sort_urls={s: self._query_url(request, sort=s, page=None) for s in SORTS},
            running_sampled=sampled,
            running_sample=listing.MAX_PAGE,
            schedules=describe(queue, emq_settings().schedules),
            query=query,
            pager=pager,
            page_urls=self._page_urls(request, pager),
            refresh=refresh,
            refresh_seconds=self.refresh_seconds,
            refresh_url=self._query_url(request, refresh="0" if refresh else None),
            clear_url=self._query_url(request, q=None, page=None),
            here=request.get_full_path(),
            **(extra_context or {}),
        )
        return TemplateResponse(request, "admin/django_emq/lanes.html", context)

    def _ring_url(self, request: HttpRequest, queue: str, name: str) -> str | None:
        """A lane's page, or a tenant entry's lanes (the lanes view filtered)."""
        if is_lane(name):
            return self._url("detail", queue, name)
        owner = entry_tenant(name)
        return None if owner is None else self._query_url(request, tenant=owner, q=None, page=None)

    def _lane_rows(
        self,
        queue: AnyQueue,
        infos: list[LaneInfo],
        deepest: int,
        server_ms: int,
    ) -> list[dict[str, Any]]:
        names = [info.lane for info in infos]
        oldest = browse.oldest_enqueued(queue, names)
        owners = lane_owners(names)
        rows = []
        for info in infos:
            enqueued = oldest.get(info.lane)
            rows.append(
                {
                    "info": info,
                    "owner": owners.get(info.lane, ""),
                    "tenant_url": (
                        "?" + urlencode({"queue": queue.name, "tenant": info.tenant})
                        if info.tenant
                        else None
                    ),
                    "bar_max": max(deepest, info.depth, 1),
                    "oldest": None if enqueued is None else duration(server_ms - enqueued),
                    "oldest_ms": enqueued,
                    "url": self._url("detail", queue.name, info.lane),
                    "pause_url": self._url(
                        "action", queue.name, info.lane, "resume" if info.paused else "pause"
                    ),
                }
            )
        return rows

    @staticmethod
    def _query_url(request: HttpRequest, **changes: str | None) -> str:
        query = request.GET.copy()
        for key, value in changes.items():
            if value is None:
                query.pop(key, None)
            else:
                query[key] = value
        return "?" + query.urlencode()

    def _page_urls(self, request: HttpRequest, pager: Pager | None) -> dict[str, str]:
        if pager is None:
            return {}
        urls = {}
        if pager.previous is not None:
            urls["previous"] = self._query_url(request, page=str(pager.previous))
        if pager.next is not None:
            urls["next"] = self._query_url(request, page=str(pager.next))
        return urls

    # -- one lane ----------------------------------------------------------------

    def lane_view(self, request: HttpRequest, queue_name: str, lane: str) -> HttpResponse:
        """One lane: settings, pending jobs in run order, the first scheduled
        ones by due time, running jobs, dead jobs."""
        self._require_view(request)
        queue = self._queue(queue_name)
        lane = self._lane(lane)
        info = queue.lanes_named([lane])[0]
        home = home_of(queue, lane)  # the queue (of a sharded queue: the shard) holding it
        per = self.jobs_per_page
        pages = {
            "pending": Pager.requested(request.GET.get("pending")),
            "inflight": Pager.requested(request.GET.get("inflight")),
            "dead": Pager.requested(request.GET.get("dead")),
        }
        pending = browse.pending_jobs(home, lane, (pages["pending"] - 1) * per, per)
        inflight = browse.inflight_jobs(home, lane, (pages["inflight"] - 1) * per, per)
        dead = browse.dead_jobs(home, lane, (pages["dead"] - 1) * per, per)
        scheduled = browse.scheduled_jobs(home, lane, per)
        context = self._context(
            request,
            _("Lane %(lane)s") % {"lane": lane},
            queue=queue.name,
            lane=lane,
            info=info,
            owner=lane_owners([lane]).get(lane, ""),
            status=_status(info),
            **self._refresh(request, info.inflight > 0),
            list_url=self._url("changelist") + "?" + urlencode({"queue": queue.name}),
            pending=self._job_listing(request, "pending", pending, pages["pending"]),
            inflight=self._job_listing(request, "inflight", inflight, pages["inflight"]),
            dead=self._job_listing(request, "dead", dead, pages["dead"]),
            scheduled=_scheduled_listing(scheduled, pending.server_ms, per),
            action_urls={  # retry-dead -> retry_dead: templates cannot look up dashes
                name.replace("-", "_"): self._url("action", queue.name, lane, name)
                for name in ACTIONS
            },
            here=request.get_full_path(),
            job_base=reverse("admin:django_emq_job_changelist", current_app=self.admin_site.name)
            + f"{queue.name}/",
        )
        return TemplateResponse(request, "admin/django_emq/lane.html", context)

    def _job_listing(
        self, request: HttpRequest, kind: str, page: browse.JobPage, number: int
    ) -> dict[str, Any]:
        pager = Pager(number, page.total, self.jobs_per_page)
        rows = []
        for position, job in enumerate(page.jobs, start=pager.offset + 1):
            error_class, traceback = split_error(job.error)
            rows.append(
                {
                    "job": job,
                    "position": position,
                    "enqueued": moment(job.enqueued_ms),
                    "waited": duration(page.server_ms - (job.enqueued_ms or page.server_ms)),
                    "claimed": moment(job.claimed_ms),
                    "running": duration(page.server_ms - (job.claimed_ms or page.server_ms)),
                    "lease_left": (
                        None
                        if job.deadline_ms is None
                        else duration(job.deadline_ms - page.server_ms)
                    ),
                    "lease_expired": job.deadline_ms is not None
                    and job.deadline_ms <= page.server_ms,
                    "finished": moment(job.finished_ms),
                    "error_class": error_class,
                    "error_line": error_message(error_class, traceback),
                    "traceback": cut_traceback(traceback),
                    "traceback_cut": len(traceback) > TRACEBACK_SHOWN,
                }
            )
        urls = {}
        if pager.previous is not None:
            urls["previous"] = self._query_url(request, **{kind: str(pager.previous)})
        if pager.next is not None:
            urls["next"] = self._query_url(request, **{kind: str(pager.next)})
        return {"rows": rows, "pager": pager, "urls": urls}


def _scheduled_listing(page: browse.ScheduledPage, server_ms: int, shown: int) -> dict[str, Any]:
    """The lane page's scheduled jobs: each with its due time and how long until
    then; ``more``: there may be more than those shown (the page shows the
    first ``shown``, or the queue's schedule was longer than was looked through)."""
    rows = [
        {"job": job, "due": moment(at), "due_in": duration(at - server_ms)} for job, at in page.jobs
    ]
    return {
        "rows": rows,
        "more": len(rows) >= shown,
        "looked_at": page.looked_at,
        "partial": page.looked_at < page.queue_total,
    }


def _tenant_arg(raw: str | None) -> str | None:
    """The ``tenant`` filter of the lanes view, when it names a tenant id."""
    try:
        return None if not raw else validate_tenant(raw.strip())
    except ValueError:
        return None


def _status(info: LaneInfo) -> str:
    """Why the lane is or is not in rotation."""
    if info.paused:
        return _("Paused")
    if info.depth == 0:
        return _("Empty")
    if info.ceiling is not None and info.inflight >= info.ceiling:
        return _("At its ceiling")
    return _("In rotation")

"""The lane actions' views: run one action on POST, or show its confirmation
page on GET (which changes nothing). A part of :class:`~.lanes.LaneAdmin`."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.utils.http import urlencode
from django.utils.translation import gettext as _

from ..engine import browse
from ..engine.shards import AnyQueue, home_of
from .actions import ACTIONS, Action, DeadJobsForm, form_errors
from .base import ConsoleAdmin


class ActionViews(ConsoleAdmin):
    """``action_view`` and its confirmation page; the admin supplies the rest."""

    @staticmethod
    def _lane(lane: str) -> str:
        raise NotImplementedError

    def action_view(
        self, request: HttpRequest, queue_name: str, lane: str, action: str
    ) -> HttpResponseBase:
        """Run one lane action on POST; GET shows the confirmation page of one that
        asks for it (and changes nothing)."""
        if not self.has_manage_permission(request):
            raise PermissionDenied
        queue = self._queue(queue_name)
        lane = self._lane(lane)
        spec = ACTIONS.get(action)
        if spec is None:
            raise Http404(_("No lane action %(action)s.") % {"action": action})
        if request.method not in ("GET", "POST") or (request.method == "GET" and not spec.confirm):
            return HttpResponseNotAllowed(["POST"])
        data = request.POST if request.method == "POST" else request.GET
        back = self._next(request, data.get("next"), self._url("detail", queue.name, lane))
        form = spec.form(data)
        if not form.is_valid():
            messages.error(
                request,
                _("%(action)s: %(errors)s Nothing was changed.")
                % {"action": spec.title, "errors": form_errors(form)},
            )
            return HttpResponseRedirect(back)
        if spec.confirm and (request.method == "GET" or data.get("confirmed") != "yes"):
            return self._confirm(request, queue, lane, spec, form.cleaned_data, back)
        level, text, *cursor = spec.run(home_of(queue, lane), lane, form.cleaned_data)
        messages.add_message(request, level, text)
        if cursor and cursor[0]:  # it stopped at the engine's bound: offer to go on
            go_on = {**form.cleaned_data, "cursor": cursor[0]}
            return self._confirm(request, queue, lane, spec, go_on, back)
        return HttpResponseRedirect(back)

    def _confirm(
        self,
        request: HttpRequest,
        queue: AnyQueue,
        lane: str,
        spec: Action,
        data: dict[str, Any],
        back: str,
    ) -> HttpResponse:
        info = queue.lanes_named([lane])[0]
        ids = DeadJobsForm.chosen(data) if "scope" in data else None
        home = home_of(queue, lane)
        dead_total = browse.dead_jobs(home, lane, 0, 1).total if "scope" in data else 0
        context = self._context(
            request,
            _("Are you sure?"),
            queue=queue.name,
            lane=lane,
            info=info,
            action=spec,
            scope=data.get("scope", ""),
            cursor=data.get("cursor", ""),
            ids=ids or [],
            count=len(ids) if ids is not None else dead_total,
            back=back,
            list_url=self._url("changelist") + "?" + urlencode({"queue": queue.name}),
            lane_url=self._url("detail", queue.name, lane),
        )
        return TemplateResponse(request, "admin/django_emq/confirm.html", context)

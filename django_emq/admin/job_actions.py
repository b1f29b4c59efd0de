"""What an operator can do to one job from its page (cancel, run a scheduled
job now, retry a dead one, move it to another lane) and to a queue's dead
jobs in bulk (retry or delete, selected or all, after a confirmation page).
Each is POST + CSRF with ``django_emq.manage_lanes``; a GET changes nothing."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponseBase,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..engine.ids import validate_job_id, validate_lane
from ..engine.payload import text
from ..engine.shards import AnyQueue
from ..exceptions import InvalidJobState, JobNotFound
from .actions import DeadJobsForm, form_errors

#: Dead jobs retried or deleted per call when a bulk action takes them all.
ALL_BATCH = 500


class MoveForm(forms.Form):
    lane = forms.CharField(label=gettext_lazy("Lane"), max_length=64)

    def clean_lane(self) -> str:
        try:
            return validate_lane(self.cleaned_data["lane"].strip())
        except ValueError:
            raise forms.ValidationError(_("That is not a lane id.")) from None


class JobActionViews:
    """The job actions and the dead-jobs bulk actions; the admin supplies the rest."""

    def has_manage_permission(self, request: HttpRequest) -> bool:
        raise NotImplementedError

    def _queue(self, name: str) -> AnyQueue:
        raise NotImplementedError

    def _url(self, kind: str, *args: str) -> str:
        raise NotImplementedError

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def _back(request: HttpRequest, default: str) -> str:
        target = request.POST.get("next")
        if target and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            return target
        return default

    def job_action_view(
        self, request: HttpRequest, queue_name: str, job_id: str, action: str
    ) -> HttpResponseBase:
        """Run one action on one job (POST only)."""
        if not self.has_manage_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        queue = self._queue(queue_name)
        try:
            validate_job_id(job_id)
        except ValueError:
            raise Http404(_("No job %(id)s.") % {"id": job_id[:40]}) from None
        back = self._back(request, self._url("detail", queue.name, job_id))
        try:
            level, message = self._run_job_action(request, queue, job_id, action)
        except JobNotFound:
            level, message = messages.ERROR, _("Job %(id)s no longer exists.") % {"id": job_id}
        except InvalidJobState:
            level, message = (
                messages.ERROR,
                _("Job %(id)s is no longer in a state that allows this. Nothing was changed.")
                % {"id": job_id},
            )
        messages.add_message(request, level, message)
        return HttpResponseRedirect(back)

    def _run_job_action(
        self, request: HttpRequest, queue: AnyQueue, job_id: str, action: str
    ) -> tuple[int, str]:
        values = {"id": job_id}
        if action == "cancel":
            if queue.cancel(job_id) == "requested":
                return messages.SUCCESS, _(
                    "Job %(id)s is running: it was asked to stop, and stops when its task "
                    "next looks."
                ) % values
            return messages.SUCCESS, _("Job %(id)s cancelled: it will not run.") % values
        if action == "run-now":
            queue.run_now(job_id)
            return messages.SUCCESS, _("Job %(id)s is due now: back in its lane.") % values
        if action == "retry":
            if queue.retry_dead([job_id]) == 0:
                raise InvalidJobState(job_id, "not dead")
            return messages.SUCCESS, _("Job %(id)s sent back to its lane.") % values
        if action == "move":
            form = MoveForm(request.POST)
            if not form.is_valid():
                return messages.ERROR, _("Move: %(errors)s Nothing was changed.") % {
                    "errors": form_errors(form)
                }
            lane = form.cleaned_data["lane"]
            try:
                moved = queue.move(job_id, lane)
            except ValueError as exc:
                return messages.ERROR, f"{exc}"
            if not moved:
                return messages.WARNING, _("Job %(id)s is in lane %(lane)s already.") % {
                    **values,
                    "lane": lane,
                }
            return messages.SUCCESS, _("Job %(id)s moved to lane %(lane)s.") % {
                **values,
                "lane": lane,
            }
        raise Http404(_("No job action %(action)s.") % {"action": action})

    def dead_action_view(
        self, request: HttpRequest, queue_name: str, action: str
    ) -> HttpResponseBase:
        """Retry or delete a queue's dead jobs, selected or all: the first POST
        shows what would change, the confirmed one changes it."""
        if not self.has_manage_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if action not in ("retry", "delete"):
            raise Http404(_("No dead-jobs action %(action)s.") % {"action": action})
        queue = self._queue(queue_name)
        list_url = self._url("changelist") + "?" + urlencode({"queue": queue.name, "state": "dead"})
        back = self._back(request, list_url)
        form = DeadJobsForm(request.POST)
        if not form.is_valid():
            messages.error(
                request, _("%(errors)s Nothing was changed.") % {"errors": form_errors(form)}
            )
            return HttpResponseRedirect(back)
        ids = DeadJobsForm.chosen(form.cleaned_data)
        if request.POST.get("confirmed") != "yes":
            count = len(ids) if ids is not None else queue.totals().dead
            context = self._context(
                request,
                _("Are you sure?"),
                queue=queue.name,
                action=action,
                scope=form.cleaned_data["scope"],
                ids=ids or [],
                count=count,
                back=back,
                list_url=list_url,
            )
            return TemplateResponse(request, "admin/django_emq/jobs_confirm.html", context)
        done = self._dead_all(queue, action) if ids is None else self._dead_ids(queue, action, ids)
        if action == "retry":
            text_ = ngettext(
                "Sent %(count)d dead job back to its lane.",
                "Sent %(count)d dead jobs back to their lanes.",
                done,
            )
        else:
            text_ = ngettext("Deleted %(count)d dead job.", "Deleted %(count)d dead jobs.", done)
        messages.add_message(
            request, messages.SUCCESS if done else messages.WARNING, text_ % {"count": done}
        )
        return HttpResponseRedirect(back)

    @staticmethod
    def _dead_ids(queue: AnyQueue, action: str, ids: list[str]) -> int:
        return queue.retry_dead(ids) if action == "retry" else queue.delete_dead(ids)

    @classmethod
    def _dead_all(cls, queue: AnyQueue, action: str) -> int:
        """Every dead job of the queue, a batch at a time (never one long script)."""
        total = 0
        for shard in queue.shards:
            while True:
                batch = [
                    text(i) for i in shard.connection.zrange(shard.keys.dead, 0, ALL_BATCH - 1)
                ]
                if not batch:
                    break
                done = cls._dead_ids(shard, action, batch)
                total += done
                if done == 0:
                    break
        return total

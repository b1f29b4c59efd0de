"""What an operator can do to one job from its page (cancel, run a scheduled
job now, retry a dead one, move it to another lane) and to a queue's dead
jobs in bulk (retry or delete, selected or all, after a confirmation page).
Each is POST + CSRF with ``django_emq.manage_lanes``; a GET changes nothing."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import (
    Http404,
    HttpRequest,
    HttpResponseBase,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..engine import bulk
from ..engine.ids import validate_job_id
from ..engine.payload import text
from ..engine.rows import Row
from ..engine.shards import AnyQueue
from ..exceptions import EMQError, InvalidJobState, JobNotFound
from .actions import DeadJobsForm, form_errors
from .base import ConsoleAdmin
from .lookup import lanes_named_by

#: Dead jobs retried or deleted per call when a bulk action takes them all.
ALL_BATCH = 500


def lane_or_user(value: str) -> str:
    """The lane ``value`` names: a lane id, or the username or email of a user
    (their ``lane_for`` lane); ``ValidationError`` when it is neither, or names
    several users."""
    lanes = lanes_named_by(value, 2)
    if len(lanes) == 1:
        return lanes[0]
    if lanes:
        raise forms.ValidationError(
            _("%(value)s names several users: give the lane id.") % {"value": value[:64]}
        )
    raise forms.ValidationError(
        _("%(value)s is neither a lane id nor a user's username or email.") % {"value": value[:64]}
    )


class MoveForm(forms.Form):
    lane = forms.CharField(
        label=gettext_lazy("Lane"),
        max_length=254,
        help_text=gettext_lazy("A lane id, or a user's username or email (their lane)."),
    )

    def clean_lane(self) -> str:
        return lane_or_user(self.cleaned_data["lane"].strip())


class RunAgainForm(forms.Form):
    lane = forms.CharField(label=gettext_lazy("Lane"), max_length=254, required=False)

    def clean_lane(self) -> str | None:
        value = self.cleaned_data["lane"].strip()
        return lane_or_user(value) if value else None


class JobActionViews(ConsoleAdmin):
    """The job actions and the dead-jobs bulk actions; the admin supplies the rest."""

    def job_action_view(
        self, request: HttpRequest, queue_name: str, job_id: str, action: str
    ) -> HttpResponseBase:
        """Run one action on one job (POST only)."""
        if (refused := self.refuse_unless_managing(request)) is not None:
            return refused
        queue = self._queue(queue_name)
        try:
            validate_job_id(job_id)
        except ValueError:
            raise Http404(_("No job %(id)s.") % {"id": job_id[:40]}) from None
        back = self._next(
            request, request.POST.get("next"), self._url("detail", queue.name, job_id)
        )
        if action == "run-again":
            return self._run_again(request, queue, job_id, back)
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

    def _run_again(
        self, request: HttpRequest, queue: AnyQueue, job_id: str, back: str
    ) -> HttpResponseBase:
        """Run an ended job again as a new job: the first POST shows the
        confirmation page, the confirmed one enqueues and opens the new job."""
        form = RunAgainForm(request.POST)
        if not form.is_valid():
            messages.error(
                request,
                _("Run again: %(errors)s Nothing was changed.") % {"errors": form_errors(form)},
            )
            return HttpResponseRedirect(back)
        lane = form.cleaned_data["lane"]
        if request.POST.get("confirmed") != "yes":
            row = queue.job(job_id)
            if row is None:
                return self._cannot_run_again(request, JobNotFound(job_id, "gone"), job_id, back)
            if row.get(Row.STATE) not in bulk.ENDED:
                return self._cannot_run_again(
                    request, InvalidJobState(job_id, "not ended"), job_id, back
                )
            context = self._context(
                request,
                _("Are you sure?"),
                queue=queue.name,
                action="run-again",
                job_id=job_id,
                task=row.get(Row.TASK, ""),
                target=lane or row.get(Row.LANE, ""),
                fields={"lane": lane} if lane else {},
                ids=[],
                back=back,
                list_url=self._url("changelist") + "?" + urlencode({"queue": queue.name}),
            )
            return TemplateResponse(request, "admin/django_emq/bulk_confirm.html", context)
        try:  # confirmed: run_again reads the row itself and refuses as above
            new_id = bulk.run_again(queue, job_id, lane)
        except (ValueError, EMQError) as exc:  # gone, not ended, a lane full, a row unreadable
            return self._cannot_run_again(request, exc, job_id, back)
        text_ = _("Job %(new)s enqueued: a copy of job %(id)s.") % {"new": new_id, "id": job_id}
        messages.success(request, text_)
        return HttpResponseRedirect(self._url("detail", queue.name, new_id))

    @staticmethod
    def _cannot_run_again(
        request: HttpRequest, exc: Exception, job_id: str, back: str
    ) -> HttpResponseBase:
        """Say why job ``job_id`` cannot run again (gone, not ended, or what the
        engine refused); nothing was changed."""
        if isinstance(exc, JobNotFound):
            text_ = _("Job %(id)s no longer exists.") % {"id": job_id}
        elif isinstance(exc, InvalidJobState):
            text_ = _("Job %(id)s has not ended: it cannot run again.") % {"id": job_id}
        else:
            text_ = f"{exc}"
        messages.error(request, text_)
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
        if (refused := self.refuse_unless_managing(request)) is not None:
            return refused
        if action not in ("retry", "delete"):
            raise Http404(_("No dead-jobs action %(action)s.") % {"action": action})
        queue = self._queue(queue_name)
        list_url = self._url("changelist") + "?" + urlencode({"queue": queue.name, "state": "dead"})
        back = self._next(request, request.POST.get("next"), list_url)
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

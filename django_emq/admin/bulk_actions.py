"""What an operator can do to many jobs of a queue at once from the jobs page:
cancel every job of a task, cancel the jobs a search finds, send back every
dead job of a task (the engine's :mod:`~django_emq.engine.bulk`). Each is a
POST with CSRF and ``django_emq.manage_lanes``: the first POST shows a
confirmation page, the confirmed one acts; a GET changes nothing."""

from __future__ import annotations

from typing import Any, ClassVar

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

from ..engine import bulk, listing
from ..engine.ids import validate_task_path
from ..engine.shards import AnyQueue
from .actions import cancelled_message, check_job_ids, form_errors
from .base import ConsoleAdmin

#: Most jobs "cancel the jobs found" takes: every page a search may show.
MOST_FOUND = 1_000
#: States a job the search found is cancelled in (the others have ended).
CANCELLABLE = ("pending", "scheduled", "active")


class TaskForm(forms.Form):
    task = forms.CharField(label=gettext_lazy("Task"), max_length=300)
    #: where the last call stopped (the engine's cursor), to go on from there
    cursor = forms.CharField(required=False, max_length=1000)

    def clean_task(self) -> str:
        try:
            return validate_task_path(self.cleaned_data["task"].strip())
        except ValueError:
            raise forms.ValidationError(
                _("Give a task's whole dotted path, such as myapp.tasks.send_mail.")
            ) from None


class SearchForm(forms.Form):
    q = forms.CharField(label=gettext_lazy("Search"), max_length=300)
    #: the ids the confirmation page showed, space-separated: exactly these are cancelled
    ids = forms.CharField(required=False, max_length=MOST_FOUND * 130)

    def clean_ids(self) -> list[str]:
        ids: list[str] = str(self.cleaned_data["ids"]).split()
        if len(ids) > MOST_FOUND:
            raise forms.ValidationError(_("Too many jobs."))
        check_job_ids(ids)
        return ids


def found_ids(queue: AnyQueue, query: str) -> list[str]:
    """The jobs a search for ``query`` lists that can still be cancelled."""
    found = listing.find_by_task(queue, query, MOST_FOUND)
    return [j.row.job_id for j in found if j.row.state in CANCELLABLE]


class BulkActionViews(ConsoleAdmin):
    """``bulk_action_view``; the admin supplies the rest."""

    #: action -> the form it reads
    BULK: ClassVar[dict[str, type[forms.Form]]] = {
        "cancel-task": TaskForm,
        "cancel-search": SearchForm,
        "retry-dead-task": TaskForm,
    }

    def bulk_action_view(
        self, request: HttpRequest, queue_name: str, action: str
    ) -> HttpResponseBase:
        """One bulk action on a queue's jobs: POST shows what it will do, the
        confirmed POST does it."""
        if (refused := self.refuse_unless_managing(request)) is not None:
            return refused
        form_class = self.BULK.get(action)
        if form_class is None:
            raise Http404(_("No bulk action %(action)s.") % {"action": action})
        queue = self._queue(queue_name)
        list_url = self._url("changelist") + "?" + urlencode({"queue": queue.name})
        back = self._next(request, request.POST.get("next"), list_url)
        form = form_class(request.POST)
        if not form.is_valid():
            messages.error(
                request, _("%(errors)s Nothing was changed.") % {"errors": form_errors(form)}
            )
            return HttpResponseRedirect(back)
        data = form.cleaned_data
        if request.POST.get("confirmed") != "yes":
            return self._bulk_confirm(request, queue, action, data, back, list_url)
        try:
            level, text, cursor = self._run_bulk(queue, action, data)
        except ValueError as exc:  # a cursor edited by hand
            messages.error(request, _("%(error)s Nothing was changed.") % {"error": exc})
            return HttpResponseRedirect(back)
        messages.add_message(request, level, text)
        if cursor:  # it stopped at the engine's bound: offer to go on from there
            data = {**data, "cursor": cursor}
            return self._bulk_confirm(request, queue, action, data, back, list_url)
        return HttpResponseRedirect(back)

    def _bulk_confirm(
        self,
        request: HttpRequest,
        queue: AnyQueue,
        action: str,
        data: dict[str, Any],
        back: str,
        list_url: str,
    ) -> TemplateResponse:
        ids = found_ids(queue, data["q"]) if action == "cancel-search" else []
        fields = {name: value for name, value in data.items() if value and name != "ids"}
        if action == "cancel-search":  # the confirmed POST cancels exactly these
            fields["ids"] = " ".join(ids)
        context = self._context(
            request,
            _("Are you sure?"),
            queue=queue.name,
            action=action,
            fields=fields,
            ids=ids,
            count=len(ids),
            back=back,
            list_url=list_url,
        )
        return TemplateResponse(request, "admin/django_emq/bulk_confirm.html", context)

    @staticmethod
    def _run_bulk(queue: AnyQueue, action: str, data: dict[str, Any]) -> tuple[int, str, str]:
        """The action done: its message's level and text, and the cursor to go
        on from when it stopped at the engine's bound ('' when it got through)."""
        if action == "cancel-task":
            done = bulk.cancel_task(queue, data["task"], data.get("cursor", ""))
            return (*cancelled_message(done), done.cursor)
        if action == "cancel-search":
            return (*cancelled_message(bulk.cancel_jobs(queue, data["ids"])), "")
        sent = bulk.retry_dead_of_task(queue, data["task"], data.get("cursor", ""))
        text = ngettext(
            "Sent %(n)d dead job of %(task)s back to its lane.",
            "Sent %(n)d dead jobs of %(task)s back to their lanes.",
            sent.sent,
        ) % {"n": sent.sent, "task": data["task"]}
        if not sent.complete:
            text += " " + _("It stopped after the most jobs one call looks at: go on below.")
        return (messages.SUCCESS if sent.sent else messages.WARNING), text, sent.cursor

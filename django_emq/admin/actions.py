"""What an operator can do to one lane from the admin: each action is a form
(validated before anything changes) and one engine call that answers with the
message to show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from ..engine import bulk
from ..engine.ids import validate_job_id
from ..engine.queue import MAX_WEIGHT, Queue
from ..engine.records import MAX_CEILING, MAX_DEPTH_LIMIT, MAX_RATE_COUNT, MAX_RATE_PERIOD

#: Most job ids one dead-jobs form may name (a page of them is far fewer).
MAX_IDS = 500

Outcome = tuple[int, str] | tuple[int, str, str]


def check_job_ids(ids: list[str]) -> None:
    """``ValidationError`` naming the first of ``ids`` that is no job id."""
    for job_id in ids:
        try:
            validate_job_id(job_id)
        except ValueError:
            raise forms.ValidationError(
                _("%(id)r is not a job id.") % {"id": job_id[:40]}
            ) from None


class JobIdsField(forms.Field):
    """Job ids posted as repeated ``job`` fields (the checkboxes of a listing)."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        if not value:
            return []
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in value]

    def validate(self, value: Any) -> None:
        super().validate(value)
        if len(value) > MAX_IDS:
            raise forms.ValidationError(
                _("Select at most %(max)d jobs at once.") % {"max": MAX_IDS}
            )
        check_job_ids(value)


class NoFieldsForm(forms.Form):
    """An action that takes nothing but the lane."""


class CancelAllForm(forms.Form):
    """Cancel every job: where the last call stopped (the engine's cursor), to go on."""

    cursor = forms.CharField(required=False, max_length=1000)


class CeilingForm(forms.Form):
    ceiling = forms.IntegerField(
        label=gettext_lazy("Ceiling"),
        required=False,
        min_value=1,
        max_value=MAX_CEILING,
        help_text=gettext_lazy("Most jobs of the lane running at once; blank removes it."),
    )


class WeightForm(forms.Form):
    weight = forms.IntegerField(
        label=gettext_lazy("Weight"),
        min_value=1,
        max_value=MAX_WEIGHT,
        help_text=gettext_lazy("Jobs served from the lane per turn of the ring."),
    )


class MaxDepthForm(forms.Form):
    max_depth = forms.IntegerField(
        label=gettext_lazy("Max depth"),
        required=False,
        min_value=1,
        max_value=MAX_DEPTH_LIMIT,
        help_text=gettext_lazy(
            "Most pending jobs the lane may hold; blank removes it (the queue's default applies)."
        ),
    )


class RateForm(forms.Form):
    count = forms.IntegerField(
        label=gettext_lazy("Jobs"),
        required=False,
        min_value=1,
        max_value=MAX_RATE_COUNT,
        help_text=gettext_lazy("Most jobs started per period; blank clears the lane's rate."),
    )
    per_seconds = forms.FloatField(
        label=gettext_lazy("Per seconds"),
        required=False,
        min_value=0.001,
        max_value=MAX_RATE_PERIOD,
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("count") is not None and data.get("per_seconds") is None:
            raise forms.ValidationError(_("Give the period of the rate in seconds."))
        return data


class DeadJobsForm(forms.Form):
    scope = forms.ChoiceField(
        choices=[("selected", gettext_lazy("Selected")), ("all", gettext_lazy("All"))]
    )
    job = JobIdsField(required=False, label=gettext_lazy("Dead jobs"))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("scope") == "selected" and not data.get("job"):
            raise forms.ValidationError(_("Select at least one dead job."))
        return data

    @staticmethod
    def chosen(data: Mapping[str, Any]) -> list[str] | None:
        """The ids the form names, or ``None`` for all of the lane's dead jobs."""
        return None if data["scope"] == "all" else list(data["job"])


def _pause(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    if queue.pause(lane):
        return messages.SUCCESS, _("Lane %(lane)s paused.") % {"lane": lane}
    return messages.WARNING, _("Lane %(lane)s was paused already.") % {"lane": lane}


def _resume(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    if queue.resume(lane):
        return messages.SUCCESS, _("Lane %(lane)s resumed.") % {"lane": lane}
    return messages.WARNING, _("Lane %(lane)s was not paused.") % {"lane": lane}


def _ceiling(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    ceiling = data["ceiling"]
    queue.set_limit(lane, ceiling)
    if ceiling is None:
        return messages.SUCCESS, _("Ceiling of lane %(lane)s removed.") % {"lane": lane}
    return messages.SUCCESS, _("Ceiling of lane %(lane)s set to %(ceiling)d.") % {
        "lane": lane,
        "ceiling": ceiling,
    }


def _weight(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    queue.set_weight(lane, data["weight"])
    return messages.SUCCESS, _("Weight of lane %(lane)s set to %(weight)d.") % {
        "lane": lane,
        "weight": data["weight"],
    }


def _max_depth(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    max_depth = data["max_depth"]
    queue.set_max_depth(lane, max_depth)
    if max_depth is None:
        return messages.SUCCESS, _("Max depth of lane %(lane)s removed.") % {"lane": lane}
    return messages.SUCCESS, _("Max depth of lane %(lane)s set to %(max_depth)d.") % {
        "lane": lane,
        "max_depth": max_depth,
    }


def _rate(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    if data["count"] is None:
        queue.clear_rate(lane)
        return messages.SUCCESS, _("Rate of lane %(lane)s cleared.") % {"lane": lane}
    queue.set_rate(lane, data["count"], data["per_seconds"])
    return messages.SUCCESS, _("Lane %(lane)s starts at most %(count)d jobs per %(per)gs.") % {
        "lane": lane,
        "count": data["count"],
        "per": data["per_seconds"],
    }


def _drain(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    count = queue.drain(lane)
    text = ngettext(
        "Drained %(count)d pending job from lane %(lane)s.",
        "Drained %(count)d pending jobs from lane %(lane)s.",
        count,
    )
    return messages.SUCCESS, text % {"count": count, "lane": lane}


def _retry_dead(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    count = queue.retry_dead(DeadJobsForm.chosen(data), lane=lane)
    if not count:
        return messages.WARNING, _("No dead job of lane %(lane)s to retry.") % {"lane": lane}
    text = ngettext(
        "Sent %(count)d dead job back to lane %(lane)s.",
        "Sent %(count)d dead jobs back to lane %(lane)s.",
        count,
    )
    return messages.SUCCESS, text % {"count": count, "lane": lane}


def _delete_dead(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    count = queue.delete_dead(DeadJobsForm.chosen(data), lane=lane)
    if not count:
        return messages.WARNING, _("No dead job of lane %(lane)s to delete.") % {"lane": lane}
    text = ngettext(
        "Deleted %(count)d dead job of lane %(lane)s.",
        "Deleted %(count)d dead jobs of lane %(lane)s.",
        count,
    )
    return messages.SUCCESS, text % {"count": count, "lane": lane}


def cancelled_message(done: bulk.Bulk) -> tuple[int, str]:
    """What a bulk cancel did, as a message level and text."""
    parts = [
        ngettext(
            "Cancelled %(n)d job: it will not run.",
            "Cancelled %(n)d jobs: they will not run.",
            done.cancelled,
        )
        % {"n": done.cancelled}
    ]
    if done.requested:
        parts.append(
            ngettext(
                "Asked %(n)d running job to stop.", "Asked %(n)d running jobs to stop.",
                done.requested,
            ) % {"n": done.requested}
        )  # fmt: skip
    if done.skipped:
        parts.append(
            ngettext("%(n)d had ended meanwhile.", "%(n)d had ended meanwhile.", done.skipped)
            % {"n": done.skipped}
        )
    if not done.complete:
        parts.append(_("It stopped after the most jobs one call looks at: go on below."))
    level = messages.SUCCESS if done.cancelled or done.requested else messages.WARNING
    return level, " ".join(parts)


def _cancel_all(queue: Queue, lane: str, data: Mapping[str, Any]) -> Outcome:
    """Its message, and the cursor to go on from when it stopped at the engine's bound."""
    try:
        done = bulk.cancel_lane(queue, lane, data.get("cursor", ""))
    except ValueError as exc:  # a cursor edited by hand
        return messages.ERROR, _("%(error)s Nothing was changed.") % {"error": exc}
    return (*cancelled_message(done), done.cursor)


@dataclass(frozen=True, slots=True)
class Action:
    """One lane action: its form, whether it asks for confirmation first, and what it does."""

    name: str
    title: str | Promise
    form: type[forms.Form]
    confirm: bool
    run: Callable[[Queue, str, Mapping[str, Any]], Outcome]


ACTIONS: dict[str, Action] = {
    action.name: action
    for action in (
        Action("pause", gettext_lazy("Pause"), NoFieldsForm, False, _pause),
        Action("resume", gettext_lazy("Resume"), NoFieldsForm, False, _resume),
        Action("ceiling", gettext_lazy("Set ceiling"), CeilingForm, False, _ceiling),
        Action("weight", gettext_lazy("Set weight"), WeightForm, False, _weight),
        Action("max-depth", gettext_lazy("Set max depth"), MaxDepthForm, False, _max_depth),
        Action("rate", gettext_lazy("Set rate"), RateForm, False, _rate),
        Action("drain", gettext_lazy("Drain"), NoFieldsForm, True, _drain),
        Action("cancel-all", gettext_lazy("Cancel every job"), CancelAllForm, True, _cancel_all),
        Action("retry-dead", gettext_lazy("Retry dead jobs"), DeadJobsForm, False, _retry_dead),
        Action("delete-dead", gettext_lazy("Delete dead jobs"), DeadJobsForm, True, _delete_dead),
    )
}


def form_errors(form: forms.Form) -> str:
    """A form's errors as one line for an error message."""
    parts = []
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else None
        text = " ".join(str(e) for e in errors)
        parts.append(f"{label}: {text}" if label else text)
    return " ".join(parts)

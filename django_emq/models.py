"""The admin's ``Lane`` and ``Job`` entries: models with no table.

Lanes and jobs live in Valkey, not in the database; these unmanaged models
exist so the admin index lists "Jobs" and "Lanes" under the app and so the
two permissions on ``Lane`` can be granted to users and groups like any other
(they govern the jobs pages too).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Lane(models.Model):
    """A placeholder: the admin reads lanes from Valkey (see ``django_emq.admin.lanes``)."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = (
            ("view_lanes", _("Can view lanes, their jobs and the workers")),
            ("manage_lanes", _("Can pause, drain and tune lanes and retry or delete dead jobs")),
        )
        verbose_name = _("lane")
        verbose_name_plural = _("lanes")

    def __str__(self) -> str:
        return str(self.pk)


class Job(models.Model):
    """A placeholder: the admin reads jobs from Valkey (see ``django_emq.admin.jobs``).
    Seeing and acting on jobs takes the ``Lane`` permissions."""

    class Meta:
        managed = False
        default_permissions = ()
        verbose_name = _("job")
        verbose_name_plural = _("jobs")

    def __str__(self) -> str:
        return str(self.pk)

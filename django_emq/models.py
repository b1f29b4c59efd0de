"""The admin's ``Lane`` entry: a model with no table, for its permissions.

Lanes live in Valkey, not in the database; this unmanaged model exists so the
admin index lists "Lanes" under the app and so the two permissions below can
be granted to users and groups like any other.
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

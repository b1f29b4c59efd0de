"""App configuration: wiring happens here, never at import time."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed


class EMQConfig(AppConfig):
    name = "django_emq"
    verbose_name = "Fair lanes (EMQ)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the system checks; re-read settings when a test changes them."""
        from . import checks as emq_checks
        from .conf import on_setting_changed

        checks.register(emq_checks.check_settings, "emq")
        checks.register(emq_checks.check_server, "emq")
        setting_changed.connect(on_setting_changed, dispatch_uid="django_emq.conf")

"""App configuration: wiring happens here, never at import time."""

from __future__ import annotations

from typing import Any

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

        checks.register(emq_checks.check_settings, "emq")
        checks.register(emq_checks.check_server, "emq")
        checks.register(emq_checks.check_schedules, "emq")
        setting_changed.connect(on_setting_changed, dispatch_uid="django_emq.conf")


def on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    """``setting_changed`` receiver: drop the cached settings and the shared
    client built from them. The wiring lives here so neither ``conf`` (the
    settings reader) nor ``connection`` (the client) has to know the other's
    cache: ``connection`` reads ``conf``, never the other way round."""
    from .conf import WATCHED_SETTINGS, clear_cache
    from .connection import reset_connection

    if setting in WATCHED_SETTINGS:
        clear_cache()
        reset_connection()
    elif setting == "TASKS":  # a backend's OPTIONS: settings only, the client stands
        clear_cache()

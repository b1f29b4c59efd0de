"""App configuration: wiring happens here, never at import time."""

from __future__ import annotations

from django.apps import AppConfig


class EMQConfig(AppConfig):
    name = "django_emq"
    verbose_name = "Fair lanes (EMQ)"
    default_auto_field = "django.db.models.BigAutoField"

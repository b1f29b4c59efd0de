"""The guessing game: the example site's one app."""

from __future__ import annotations

from django.apps import AppConfig


class GameConfig(AppConfig):
    name = "example_project.game"
    label = "game"
    verbose_name = "Guessing game"
    default_auto_field = "django.db.models.BigAutoField"

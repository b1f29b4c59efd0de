"""The game's rows in the admin, next to django-emq's lanes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin

from .models import Guess, Round

if TYPE_CHECKING:
    RoundAdminBase = admin.ModelAdmin[Round]
    GuessAdminBase = admin.ModelAdmin[Guess]
else:  # ModelAdmin is generic only to the type checker
    RoundAdminBase = GuessAdminBase = admin.ModelAdmin


@admin.register(Round)
class RoundAdmin(RoundAdminBase):
    list_display = ("pk", "player", "started_at", "solved_at")
    list_filter = ("solved_at",)


@admin.register(Guess)
class GuessAdmin(GuessAdminBase):
    list_display = ("pk", "player", "code", "bulls", "cows", "created_at", "scored_at", "job_id")
    list_filter = ("player",)
    search_fields = ("job_id", "player__username")

"""A player's rounds and guesses. Each guess is one row, scored by a task."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models

from .scoring import CODE_LENGTH, new_secret


class Round(models.Model):
    """One secret code a player tries to crack; a new one starts once it is."""

    player = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="rounds"
    )
    secret = models.CharField(max_length=CODE_LENGTH, default=new_secret)
    started_at = models.DateTimeField(auto_now_add=True)
    solved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-started_at", "-pk")

    def __str__(self) -> str:
        return f"round {self.pk} of {self.player}"

    @classmethod
    def current_for(cls, player: Any) -> Round:
        """The player's open round, started now if every earlier one is solved."""
        found = cls.objects.filter(player=player, solved_at__isnull=True).order_by("-pk").first()
        return found or cls.objects.create(player=player)


class Guess(models.Model):
    """A submitted guess: written by the view, scored by ``tasks.score_guess``."""

    round = models.ForeignKey(Round, on_delete=models.CASCADE, related_name="guesses")
    player = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="guesses"
    )
    code = models.CharField(max_length=CODE_LENGTH)
    created_at = models.DateTimeField(auto_now_add=True)
    #: The django.tasks result id of the scoring job (a django-emq job id).
    job_id = models.CharField(max_length=64, blank=True, db_index=True)
    #: Set by the scoring task: when it started, and its verdict.
    started_at = models.DateTimeField(null=True, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)
    bulls = models.PositiveSmallIntegerField(null=True, blank=True)
    cows = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-pk")
        verbose_name_plural = "guesses"

    def __str__(self) -> str:
        return f"{self.code} by {self.player}"

    @property
    def scored(self) -> bool:
        return self.scored_at is not None

    @property
    def cracked(self) -> bool:
        return self.bulls == CODE_LENGTH

    @property
    def wait(self) -> timedelta | None:
        """How long the guess waited for its scoring to start."""
        if self.started_at is None:
            return None
        return self.started_at - self.created_at

    def as_json(self) -> dict[str, Any]:
        wait = self.wait
        return {
            "id": self.pk,
            "code": self.code,
            "round": self.round_id,
            "created_at": self.created_at.isoformat(),
            "job_id": self.job_id,
            "state": "scored" if self.scored else "pending",
            "bulls": self.bulls,
            "cows": self.cows,
            "cracked": self.cracked,
            "wait_ms": None if wait is None else round(wait.total_seconds() * 1000),
        }

"""The scoring task. It runs in a worker, on the lane of the player who guessed."""

from __future__ import annotations

import time

from django.conf import settings
from django.tasks import task
from django.utils import timezone

from .models import Guess, Round
from .scoring import score


@task
def score_guess(guess_id: int) -> dict[str, int]:
    """Score guess ``guess_id`` against its round's secret and save the verdict.

    Idempotent, as tasks under at-least-once delivery should be: scoring the
    same guess twice writes the same verdict (``started_at`` keeps the first).
    """
    started = timezone.now()
    guess = Guess.objects.select_related("round").get(pk=guess_id)
    time.sleep(float(getattr(settings, "GAME_SCORING_SECONDS", 0.0)))  # "thinking"
    bulls, cows = score(guess.round.secret, guess.code)
    guess.bulls, guess.cows, guess.scored_at = bulls, cows, timezone.now()
    guess.started_at = guess.started_at or started
    guess.save(update_fields=["bulls", "cows", "scored_at", "started_at"])
    if guess.cracked:
        Round.objects.filter(pk=guess.round_id, solved_at__isnull=True).update(
            solved_at=guess.scored_at
        )
    return {"bulls": bulls, "cows": cows}

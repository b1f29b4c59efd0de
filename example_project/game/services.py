"""Submitting a guess: the one code path of the page, the JSON API and ``flood``."""

from __future__ import annotations

from typing import Any

from django_emq import enqueue_for

from .models import Guess, Round
from .scoring import validate_code
from .tasks import score_guess


def submit_guess(player: Any, code: str) -> Guess:
    """Save ``code`` as ``player``'s guess and enqueue its scoring on the player's lane.

    Raises ``ValueError`` (nothing written) if ``code`` is not a valid guess,
    and ``django_emq.exceptions.EnqueueError`` (the row is removed again) if
    Valkey cannot be reached.

    The row is committed before the job is enqueued, so the worker always
    finds it: Django runs in autocommit unless told otherwise. A project with
    ``ATOMIC_REQUESTS`` would use ``django_emq.enqueue_on_commit`` instead.
    """
    code = validate_code(code)
    guess = Guess.objects.create(round=Round.current_for(player), player=player, code=code)
    try:
        result = enqueue_for(player, score_guess, guess.pk)
    except Exception:
        guess.delete()
        raise
    Guess.objects.filter(pk=guess.pk).update(job_id=result.id)
    guess.job_id = result.id
    return guess

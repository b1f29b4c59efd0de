"""The player's page, its form, and the JSON API the page's script uses.

The JSON API is protected like the page: session authentication plus
Django's CSRF check (send the ``csrftoken`` cookie's value in an
``X-CSRFToken`` header). No token-based API here: a script on another site
cannot post guesses in a signed-in player's name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from django_emq import lane_for
from django_emq.exceptions import EnqueueError

from .models import Guess, Round
from .scoring import CODE_LENGTH, new_secret
from .services import submit_guess

#: Guesses the page and the list endpoint show, newest first.
SHOWN = 50
#: Guesses one press of "Mash" sends.
MASH = 100

View = Callable[..., HttpResponse]


def _api_login_required(view: View) -> View:
    """Like ``login_required``, but answers 401 JSON instead of redirecting."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return JsonResponse({"error": "sign in first"}, status=401)
        return view(request, *args, **kwargs)

    return wrapper


def _state(player: Any) -> dict[str, Any]:
    """What the page shows, as JSON: the open round, the counts, the latest guesses."""
    open_round = Round.objects.filter(player=player, solved_at__isnull=True).first()
    guesses = list(Guess.objects.filter(player=player).select_related("round")[:SHOWN])
    return {
        "lane": lane_for(player),
        "round": {
            "id": open_round.pk if open_round else None,
            # The player's rounds so far, the open one included (1 before the first guess).
            "number": Round.objects.filter(player=player).count() + (0 if open_round else 1),
            "guesses": open_round.guesses.count() if open_round else 0,
            "solved": Round.objects.filter(player=player, solved_at__isnull=False).count(),
        },
        "pending": Guess.objects.filter(player=player, scored_at__isnull=True).count(),
        "guesses": [g.as_json() for g in guesses],
    }


@login_required
@require_GET
def play(request: HttpRequest) -> HttpResponse:
    """The player's page: the form and their latest guesses (kept fresh by a script)."""
    context = {"state": _state(request.user), "code_length": CODE_LENGTH, "mash": MASH}
    return render(request, "game/play.html", context)


@login_required
@require_POST
def guess(request: HttpRequest) -> HttpResponse:
    """The form's target (without the script): submit, then back to the page."""
    try:
        made = submit_guess(request.user, request.POST.get("code", ""))
    except ValueError as exc:
        messages.error(request, str(exc))
    except EnqueueError:
        messages.error(request, "the queue is unreachable; try again in a moment")
    else:
        messages.success(request, f"{made.code} sent for scoring")
    return redirect("game:play")


@login_required
@require_POST
def mash(request: HttpRequest) -> HttpResponse:
    """The flood from the browser: ``MASH`` random guesses at once, on the player's lane."""
    try:
        for _ in range(MASH):
            submit_guess(request.user, new_secret())
    except EnqueueError:
        messages.error(request, "the queue is unreachable; try again in a moment")
    else:
        messages.success(request, f"{MASH} guesses mashed: they wait in your lane only")
    return redirect("game:play")


@_api_login_required
@require_http_methods(["GET", "POST"])
def api_guesses(request: HttpRequest) -> HttpResponse:
    """GET: the player's round and latest guesses. POST ``{"code": "0427"}``: a guess.

    POST answers 202 with the new guess (scored later; poll this endpoint or
    the guess's own), 400 for a bad code, 503 when the queue is unreachable.
    """
    if request.method == "GET":
        return JsonResponse(_state(request.user))
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return JsonResponse({"error": "the body is not JSON"}, status=400)
    code = body.get("code") if isinstance(body, dict) else None
    if not isinstance(code, str):
        return JsonResponse({"error": 'send {"code": "0427"}'}, status=400)
    try:
        made = submit_guess(request.user, code)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    except EnqueueError:
        return JsonResponse({"error": "the queue is unreachable"}, status=503)
    return JsonResponse({"guess": made.as_json()}, status=202)


@_api_login_required
@require_GET
def api_guess(request: HttpRequest, pk: int) -> HttpResponse:
    """One of the player's guesses (404 for anyone else's)."""
    found = Guess.objects.filter(player_id=request.user.pk, pk=pk).first()
    if found is None:
        return JsonResponse({"error": "no such guess"}, status=404)
    return JsonResponse({"guess": found.as_json()})

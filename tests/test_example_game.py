"""The example project's game: the rules, the page, the JSON API and the scoring task."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import call_command
from django.tasks import task_backends
from django.test import Client

from django_emq import lane_for
from django_emq.backend import FairLanesBackend
from example_project.game.models import Guess
from example_project.game.scoring import score, validate_code
from tests.factories import make_player

pytestmark = pytest.mark.urls("example_project.urls")
CSRF = "django.middleware.csrf.CsrfViewMiddleware"


@pytest.fixture(autouse=True)
def _csrf_checked(settings: Any) -> None:
    """The example site checks CSRF tokens; the test suite's settings do not by default."""
    if CSRF not in settings.MIDDLEWARE:
        settings.MIDDLEWARE = [*settings.MIDDLEWARE, CSRF]


def queue_job(job_id: str) -> dict[str, str]:
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    row = backend.queue("default").job(job_id)
    assert row is not None
    return row


def burst() -> None:
    call_command("run_emq_worker", "--burst", verbosity=0)


@pytest.fixture
def ada(db: None) -> User:
    player: User = make_player("ada")
    return player


@pytest.fixture
def signed_in(ada: User) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    return client


def csrf_token(client: Client) -> str:
    """The token the page hands its script (and its form)."""
    page = client.get("/")
    assert page.status_code == 200
    return str(page.context["csrf_token"])


@pytest.mark.parametrize(
    ("secret", "guess", "verdict"),
    [
        ("1234", "1234", (4, 0)),
        ("1234", "4321", (0, 4)),
        ("1234", "1243", (2, 2)),
        ("1122", "1212", (2, 2)),
        ("1122", "1111", (2, 0)),
        ("0427", "5689", (0, 0)),
    ],
)
def test_a_guess_scores_bulls_and_cows(secret: str, guess: str, verdict: tuple[int, int]) -> None:
    assert score(secret, guess) == verdict


@pytest.mark.parametrize("code", ["123", "12345", "12a4", "", "١٢٣٤"])
def test_a_code_is_exactly_four_ascii_digits(code: str) -> None:
    with pytest.raises(ValueError, match="4 digits"):
        validate_code(code)


def test_the_page_sends_anonymous_visitors_to_sign_in(db: None) -> None:
    answer = Client().get("/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/accounts/login/")


def test_the_sign_in_page_renders(db: None) -> None:
    answer = Client().get("/accounts/login/")
    assert answer.status_code == 200
    assert b"Sign in" in answer.content


def test_a_guess_from_the_form_rides_the_players_lane(
    emq: redis.Redis, ada: User, signed_in: Client
) -> None:
    answer = signed_in.post(
        "/guess/", {"code": "0427", "csrfmiddlewaretoken": csrf_token(signed_in)}
    )
    assert answer.status_code == 302
    guess = Guess.objects.get(player=ada)
    assert guess.code == "0427"
    assert not guess.scored
    row = queue_job(guess.job_id)
    assert row["group"] == lane_for(ada)
    assert row["task"] == "example_project.game.tasks.score_guess"
    assert json.loads(row["args"]) == [guess.pk]


def test_a_bad_code_from_the_form_writes_nothing(emq: redis.Redis, signed_in: Client) -> None:
    signed_in.post("/guess/", {"code": "12", "csrfmiddlewaretoken": csrf_token(signed_in)})
    assert not Guess.objects.exists()
    assert emq.keys("emq:*job:*") == []


@pytest.mark.django_db(transaction=True)
def test_the_worker_scores_the_guess_and_the_json_shows_it(emq: redis.Redis, settings: Any) -> None:
    settings.GAME_SCORING_SECONDS = 0.0
    ada = make_player("ada")
    client = Client(enforce_csrf_checks=True)
    client.force_login(ada)
    token = csrf_token(client)
    answer = client.post(
        "/api/guesses/",
        json.dumps({"code": "1234"}),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert answer.status_code == 202
    sent = answer.json()["guess"]
    assert sent["state"] == "pending"

    burst()

    state = client.get("/api/guesses/").json()
    assert state["pending"] == 0
    (shown,) = state["guesses"]
    assert shown["id"] == sent["id"]
    assert shown["state"] == "scored"
    guess = Guess.objects.select_related("round").get(pk=sent["id"])
    assert (shown["bulls"], shown["cows"]) == score(guess.round.secret, "1234")
    assert shown["wait_ms"] is not None
    assert client.get(f"/api/guesses/{sent['id']}/").json()["guess"] == shown


def test_the_json_api_refuses_a_post_without_the_csrf_token(
    emq: redis.Redis, signed_in: Client
) -> None:
    answer = signed_in.post(
        "/api/guesses/", json.dumps({"code": "1234"}), content_type="application/json"
    )
    assert answer.status_code == 403
    assert not Guess.objects.exists()


def test_the_json_api_answers_401_to_anonymous_callers(db: None) -> None:
    assert Client().get("/api/guesses/").status_code == 401
    assert Client().post("/api/guesses/", {}).status_code == 401


@pytest.mark.parametrize("body", ["not json", '{"code": 1234}', '["1234"]', '{"code": "99"}'])
def test_the_json_api_refuses_a_bad_body_and_writes_nothing(
    emq: redis.Redis, signed_in: Client, body: str
) -> None:
    answer = signed_in.post(
        "/api/guesses/",
        body,
        content_type="application/json",
        headers={"X-CSRFToken": csrf_token(signed_in)},
    )
    assert answer.status_code == 400
    assert "error" in answer.json()
    assert not Guess.objects.exists()
    assert emq.keys("emq:*job:*") == []


def test_a_player_cannot_read_another_players_guess(emq: redis.Redis, signed_in: Client) -> None:
    eve = make_player("eve")
    other = Client()
    other.force_login(eve)
    made = other.post(
        "/api/guesses/", json.dumps({"code": "1111"}), content_type="application/json"
    ).json()["guess"]
    assert signed_in.get(f"/api/guesses/{made['id']}/").status_code == 404
    assert signed_in.get("/api/guesses/").json()["guesses"] == []


def test_mashing_fills_only_the_mashers_lane(
    emq: redis.Redis, ada: User, signed_in: Client
) -> None:
    signed_in.post("/mash/", {"csrfmiddlewaretoken": csrf_token(signed_in)})
    backend = task_backends["default"]
    assert isinstance(backend, FairLanesBackend)
    queue = backend.queue("default")
    assert queue.depth(lane_for(ada)) == Guess.objects.filter(player=ada).count() == 100
    assert queue.totals().lanes == 1


def test_demo_users_are_created_once_and_then_left_alone(db: None, settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    first, second = io.StringIO(), io.StringIO()
    call_command("demo_users", stdout=first)
    alice = User.objects.get(username="alice")
    alice.set_password("changed")
    alice.save()
    call_command("demo_users", stdout=second)
    assert first.getvalue().count("(created)") == 6
    assert second.getvalue().count("(exists, left as it was)") == 6
    assert User.objects.get(username="admin").is_superuser
    assert User.objects.get(username="alice").check_password("changed")
    assert not User.objects.get(username="mallory").is_staff

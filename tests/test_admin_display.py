"""How the lanes admin shows a job's times and a dead job's error."""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client
from django.urls import reverse

from django_emq.admin.display import error_message
from django_emq.engine.queue import Queue
from django_emq.results import encode_error

from .factories import make_user
from .helpers import claim_one, fill, lane

pytestmark = pytest.mark.django_db
A = lane(1)


@pytest.mark.parametrize(
    ("error_class", "traceback", "shown"),
    [
        ("builtins.ValueError", "Traceback ...\nValueError: boom\n", "boom"),
        ("tests.chaos_tasks.Boom", "Traceback ...\ntests.chaos_tasks.Boom: it broke", "it broke"),
        ("builtins.KeyError", "Traceback ...\nKeyError", ""),
        ("", "RuntimeError: raw text", "RuntimeError: raw text"),
        ("builtins.ValueError", "", ""),
    ],
)
def test_the_error_line_does_not_repeat_the_exception_class(
    error_class: str, traceback: str, shown: str
) -> None:
    assert error_message(error_class, traceback) == shown


@pytest.fixture
def viewer(db: None) -> Client:
    client = Client()
    client.force_login(make_user("viewer", staff=True, perms=["view_lanes"]))
    return client


def test_job_times_show_seconds_and_a_dead_job_its_class_once(
    emq: redis.Redis, viewer: Client
) -> None:
    q = Queue("default", connection=emq)
    (job,) = fill(q, A, 1)
    claim = claim_one(q)
    q.fail(claim.job_id, claim.token, encode_error(ValueError("boom"), "T\nValueError: boom\n"))
    fill(q, A, 1)  # a pending one too

    page = viewer.get(reverse("admin:django_emq_lane_detail", args=["default", A]))
    assert page.status_code == 200
    text = page.content.decode()
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text)
    assert len(times) >= 2, "the pending job's enqueue time and the dead job's death, to the second"
    dead = text[text.index('id="emq-dead"') :]
    assert "<strong>builtins.ValueError</strong>: boom" in dead
    assert dead.count("ValueError: boom") == 1  # in the traceback only
    assert job in dead


def test_the_stylesheets_carry_the_csp_nonce_when_the_site_uses_one(
    emq: redis.Redis, viewer: Client, settings: Any
) -> None:
    """Written for Django 6.0 and 6.1 alike (``{% csp_nonce_attr %}`` is 6.1's)."""
    settings.TEMPLATES = [
        {
            **settings.TEMPLATES[0],
            "OPTIONS": {
                "context_processors": [
                    *settings.TEMPLATES[0]["OPTIONS"]["context_processors"],
                    "django.template.context_processors.csp",
                ]
            },
        }
    ]
    settings.MIDDLEWARE = [
        *settings.MIDDLEWARE,
        "django.middleware.csp.ContentSecurityPolicyMiddleware",
    ]
    page = viewer.get(reverse("admin:django_emq_lane_changelist")).content.decode()
    assert re.search(r'lanes\.css" nonce="[\w-]+">', page)


def test_the_templates_use_no_tag_django_60_lacks() -> None:
    """CI runs Django 6.1 alone; ``{% csp_nonce_attr %}`` (6.1's) would break
    every admin page on 6.0, as the version matrix found."""
    from pathlib import Path

    import django_emq

    folder = Path(django_emq.__file__).parent / "templates"
    using = [p.name for p in folder.rglob("*.html") if "csp_nonce_attr" in p.read_text()]
    assert using == []

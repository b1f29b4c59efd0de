"""Django's own task tests (``tests/tasks/test_tasks.py`` and
``test_dummy_backend.py`` of the installed Django's sdist, fetched by
``fetch.py``), run unedited against ``FairLanesBackend``.

The file is imported as Django's test runner imports it (as ``tasks.test_tasks``,
its folder's parent on ``sys.path``), and one thing is rewritten before it runs:
in the ``TASKS`` of its class-level ``override_settings``, every backend it names
(``DummyBackend``, ``ImmediateBackend``) becomes ``FairLanesBackend``. Its tests,
their assertions and its task module are Django's. The tests that fail on
purpose are listed in ``ledger.py`` (each with its reason) and marked strict
expected failures by ``conftest.py``, which leaves out (deselects, naming
them with their reason) the few it calls not applicable (a test whose own
``override_settings`` names Django's backend).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import redis
from django.test import SimpleTestCase

from django_emq import lane, lane_id

from .fetch import django_tests

#: The lane every upstream test enqueues on.
LANE = lane_id("USR", 1)

#: What each backend named in the upstream settings becomes.
SUBSTITUTES = {
    "django.tasks.backends.dummy.DummyBackend": "tests.upstream.backends.FairLanesBackend",
    "django.tasks.backends.immediate.ImmediateBackend": "tests.upstream.backends.FairLanesBackend",
}


@pytest.fixture(autouse=True)
def upstream_lane(emq: redis.Redis) -> Iterator[None]:
    """Plumbing: a fresh test database, and every enqueue of the test inside
    one lane (django-emq refuses work without one)."""
    with lane(LANE):
        yield


def load_upstream(module: str) -> ModuleType:
    """Import ``tasks.<module>`` from the fetched Django sources (``make test``
    fetches them; alone: ``python -m tests.upstream.fetch``)."""
    upstream = django_tests()
    if not upstream.fetched():
        raise RuntimeError(
            f"Django {upstream.version}'s tests/tasks are not fetched: "
            "run `python -m tests.upstream.fetch` (make test does)"
        )
    folder = str(upstream.root / "tests")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(f"tasks.{module}")


def substituted(settings: dict[str, Any]) -> dict[str, Any]:
    """The class's overridden settings with each backend swapped for ours."""
    tasks = {
        alias: {**config, "BACKEND": SUBSTITUTES.get(config["BACKEND"], config["BACKEND"])}
        for alias, config in settings["TASKS"].items()
    }
    return {**settings, "TASKS": tasks}


def _prepare(case: type[SimpleTestCase]) -> type[SimpleTestCase]:
    overridden: dict[str, Any] | None = getattr(case, "_overridden_settings", None)
    assert overridden is not None, case
    assert "TASKS" in overridden, case
    case._overridden_settings = substituted(overridden)  # type: ignore[attr-defined]
    return case


TaskTestCase = _prepare(load_upstream("test_tasks").TaskTestCase)
DummyBackendTestCase = _prepare(load_upstream("test_dummy_backend").DummyBackendTestCase)

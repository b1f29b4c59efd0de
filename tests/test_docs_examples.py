"""Every Python example of README.md and docs/ runs, as written, in this test
(issue 22: a doc example must not rot again).

Each page's examples run top to bottom in one module of their own (so a task
an example defines imports by its path, as a worker would import it), against
the test server, with the reader's own objects given (``request``, ``user``,
``report``, their tasks: :func:`given`) and nothing of the library's: an
example that uses ``get_queue`` must import it, on its page. Every ``EMQ =`` or
``TASKS =`` an example writes is read by the settings' own validation and must
have no problem; then the test's settings come back. Where an example defines
a view, the view is called (:data:`CALLED`). An example that changes the
process (an admin registration, a registered schedule) is undone after it.

The shell examples are checked, not run (they install, build and serve): every
``manage.py`` command they show exists and its arguments parse (a synopsis's
options exist), every ``make`` target and bench script they name exists.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib import admin
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from django_emq import conf, enqueue_for, get_queue, schedules
from django_emq.engine.queue import Queue
from django_emq.models import Lane

from . import tasks
from .helpers import claim_one

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: A fenced Python block of a Markdown page, indented or not (inside a list item).
PYTHON_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```", re.MULTILINE | re.DOTALL)
#: Views a page's examples define, called once the page has run: page -> names.
CALLED = {"README.md": ["submit"], "docs/django.md": ["submit"], "docs/max-depth.md": ["export"]}
pytestmark = pytest.mark.django_db


def examples(page: Path) -> list[tuple[int, str]]:
    """(line, code) of every Python example of ``page``."""
    text = page.read_text()
    return [
        (text[: m.start()].count("\n") + 2, textwrap.dedent(m.group(2)))
        for m in PYTHON_BLOCK.finditer(text)
    ]


def pages_with_examples() -> list[str]:
    return [str(page.relative_to(ROOT)) for page in PAGES if examples(page)]


class Env:
    """django-environ's ``env`` as the examples use it: ``env.str(name)``."""

    def str(self, name: str) -> str:
        return os.environ[name]


class Guess:
    """The README's model, as far as its examples use it; ``job_id`` is the id
    of a job of the ``score_guess`` its page defined (docs/django.md keeps it)."""

    class objects:  # a manager, named as Django names it
        @staticmethod
        def create(**fields: Any) -> types.SimpleNamespace:
            return types.SimpleNamespace(pk=1, **fields)

    def __init__(self, page: types.ModuleType, user: User) -> None:
        self.pk = 1
        self._page, self._user = page, user

    @property
    def job_id(self) -> str:
        """A job of the page's ``score_guess``, run by a burst worker (the
        example reads its return value)."""
        job_id = str(enqueue_for(self._user, self._page.score_guess, self.pk).id)
        call_command("run_emq_worker", "--burst", verbosity=0)
        return job_id


def given(page: types.ModuleType) -> dict[str, Any]:
    """What a reader of the docs already has: users and model instances (saved,
    so they own lanes), a request, their tasks (the test suite's), a finished
    job's result, a Valkey client and ``env``."""
    user = User.objects.create_user("reader", email="reader@example.com")
    organization = Group.objects.create(name="organization")
    user.organization = organization  # type: ignore[attr-defined]
    done = enqueue_for(user, tasks.record, "done")
    queue = get_queue()
    assert isinstance(queue, Queue)
    claim = claim_one(queue)
    assert claim.job_id == done.id
    queue.complete(claim.job_id, claim.token, "done")
    return {
        "user": user,
        "request": types.SimpleNamespace(user=user, POST={"code": "1234", "report": "7"}),
        "team": Group.objects.create(name="team"),
        "account": organization,
        "api_client": organization,
        "report": types.SimpleNamespace(pk=7, owner=user, sent_at=None),
        "Guess": Guess,
        "guess": Guess(page, user),
        "score_guess": tasks.record,
        "send_report": tasks.record,
        "build_report": tasks.record,
        "build_export": tasks.record,
        "rebuild_index": tasks.record,
        "crm_sync": tasks.record,
        "SIZES": [64, 128],
        "ROWS": ["a", "b"],
        "result": done,
        "tenant_id": "ORG" + "0" * 10 + "5",
        "client": queue.connection,
        "env": Env(),
    }


def assigned(statement: ast.stmt) -> set[str]:
    """The names a top-level statement assigns."""
    if isinstance(statement, ast.Assign):
        return {t.id for t in statement.targets if isinstance(t, ast.Name)}
    return set()


def check_settings(name: str, value: Any, settings: Any, where: str) -> None:
    """``EMQ`` or ``TASKS`` as an example wrote it, read by the settings'
    validation: no problem, no unknown key. The test's own come back after."""
    kept = settings.EMQ, settings.TASKS
    try:
        if name == "EMQ":
            settings.EMQ = value
            conf.clear_cache()
            assert (conf.problems(), conf.unknown_keys()) == ([], []), where
        else:
            settings.TASKS = {**settings.TASKS, **value}
            conf.clear_cache()
            for alias in value:
                assert conf.option_problems(alias) == [], f"{where}: {alias}"
    finally:
        settings.EMQ, settings.TASKS = kept
        conf.clear_cache()


@pytest.fixture
def undo(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Puts back what an example changes in the process: the lane admin
    (docs/admin.md registers its own) and the schedules registered in code."""
    monkeypatch.setattr(schedules, "_registry", dict(schedules._registry))
    lane_admin = type(admin.site._registry[Lane])
    yield
    if type(admin.site._registry[Lane]) is not lane_admin:
        admin.site.unregister(Lane)
        admin.site.register(Lane, lane_admin)


@pytest.mark.parametrize("page_name", pages_with_examples())
def test_every_example_of_the_page_runs(
    page_name: str,
    emq: redis.Redis,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    undo: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("EMQ_METRICS_TOKEN", "docs-example-token-0123456789")
    monkeypatch.setattr(redis, "Redis", lambda *a, **k: emq)  # docs/engine.md's redis.Redis()
    module_name = "tests.docs_page_" + re.sub(r"\W", "_", page_name)
    rq = types.ModuleType("django_rq")  # the library docs/migrating-from-django-rq.md leaves
    rq.job = lambda queue: lambda func: func  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "django_rq", rq)
    page = types.ModuleType(module_name)
    monkeypatch.setitem(sys.modules, module_name, page)
    vars(page).update(given(page))
    for line, code in examples(ROOT / page_name):
        tree = ast.parse(code, filename=page_name)
        for statement in tree.body:
            where = f"{page_name}, the example at line {line}, line {statement.lineno}"
            single = ast.Module(body=[statement], type_ignores=[])
            exec(compile(single, where, "exec"), vars(page))  # the docs' own code
            for name in assigned(statement) & {"EMQ", "TASKS"}:
                check_settings(name, vars(page)[name], settings, where)
    for view in CALLED.get(page_name, []):
        getattr(page, view)(page.request)
    capsys.readouterr()


def test_every_page_with_examples_is_run() -> None:
    """The pages found hold the examples the issue counted (44 on 2026-12-03):
    the pattern still finds them, indented ones (in list items) included."""
    found = sum(len(examples(page)) for page in PAGES)
    assert found >= 44
    assert "docs/django.md" in pages_with_examples()
    assert "README.md" in pages_with_examples()


def test_a_setting_an_example_gets_wrong_fails_the_check(emq: redis.Redis, settings: Any) -> None:
    """The settings check is no formality: a lease below the minimum or a key
    django-emq does not know fails it, and the test's settings come back."""
    kept = settings.EMQ
    for wrong in ({"LEASE": 0.01}, {"LEASES": 30}):
        with pytest.raises(AssertionError):
            check_settings("EMQ", wrong, settings, "a wrong example")
        assert kept == settings.EMQ


# -- the shell examples ----------------------------------------------------------------

#: A fenced shell block (``sh``, ``shell`` or ``console``), indented or not.
SHELL_BLOCK = re.compile(r"^([ \t]*)```(?:sh|shell|console)\n(.*?)^\1```", re.MULTILINE | re.DOTALL)


def shell_lines(page: Path) -> Iterator[str]:
    """Every command line of ``page``'s shell examples, a synopsis's
    continuation lines joined to it, a ``$`` prompt and a comment dropped."""
    for match in SHELL_BLOCK.finditer(page.read_text()):
        joined: list[str] = []
        for line in textwrap.dedent(match.group(2)).splitlines():
            line = line.split("  #", 1)[0].rstrip().removeprefix("$ ")
            if line.startswith(" ") and joined:  # a synopsis's next line
                joined[-1] += " " + line.strip()
            elif line and not line.startswith("#"):
                joined.append(line)
        yield from joined


def test_every_manage_py_command_the_docs_show_parses() -> None:
    """``python manage.py X ...``: X is a command, and its arguments parse as
    written (a synopsis in brackets: every option it names exists)."""
    from django.core.management import get_commands, load_command_class

    seen = 0
    for page in PAGES:
        for line in shell_lines(page):
            if "manage.py " not in line:
                continue
            name, *args = shlex.split(line.split("manage.py ", 1)[1])
            where = f"{page.relative_to(ROOT)}: {line}"
            assert name in get_commands(), where
            command = load_command_class(get_commands()[name], name)
            parser = command.create_parser("manage.py", name)
            if "[" in line:
                known = {o for action in parser._actions for o in action.option_strings}
                named = set(re.findall(r"(?<![\w-])--?[a-z][\w-]*", line))
                assert named - known == set(), where
            else:
                parser.parse_args(args)
            seen += 1
    assert seen >= 10


def test_every_make_target_and_bench_script_the_docs_show_exists() -> None:
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    for page in PAGES:
        for line in shell_lines(page):
            where = f"{page.relative_to(ROOT)}: {line}"
            words = shlex.split(line)
            if words[0] == "make":
                assert set(words[1:]) <= targets, where
            for script in re.findall(r"\b(bench/\w+\.py|noxfile\.py)", line):
                assert (ROOT / script).is_file(), where

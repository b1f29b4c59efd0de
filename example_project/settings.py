"""Settings of the example site: 12-factor, every value from the environment.

Development needs nothing set: ``DEBUG`` is on, the database is SQLite under
``var/``, and with no ``EMQ_URL`` django-emq runs its embedded Valkey under
``var/emq``. In production set at least ``SECRET_KEY``, ``DEBUG=off``,
``ALLOWED_HOSTS``, ``DATABASE_URL`` and ``EMQ_URL``.

| variable | default |
| --- | --- |
| ``DEBUG`` | ``on`` |
| ``SECRET_KEY`` | a development key (refused when ``DEBUG`` is off) |
| ``ALLOWED_HOSTS`` | ``localhost,127.0.0.1,[::1]`` |
| ``VAR_DIR`` | ``<repo>/var``: the database, the embedded Valkey, demo logs |
| ``DATABASE_URL`` | ``sqlite:///<VAR_DIR>/db.sqlite3`` |
| ``EMQ_URL`` | unset: the embedded Valkey under ``<VAR_DIR>/emq`` (DEBUG only) |
| ``EMQ_METRICS_TOKEN`` | unset: ``/emq/metrics`` opens to staff with ``view_lanes`` only |
| ``GAME_SCORING_SECONDS`` | ``0.05``: how long scoring one guess "thinks" |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

DEBUG: bool = env.bool("DEBUG", default=True)
DEVELOPMENT_KEY = "django-insecure-example-project-development-only"
SECRET_KEY: str = env.str("SECRET_KEY", default=DEVELOPMENT_KEY)
if not DEBUG and SECRET_KEY == DEVELOPMENT_KEY:
    raise ImproperlyConfigured("set SECRET_KEY in the environment when DEBUG is off")
ALLOWED_HOSTS: list[str] = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var"))).resolve()

INSTALLED_APPS = [
    "example_project.game",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_emq",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Every signed-in request rides its user's lane (views use enqueue_for anyway).
    "django_emq.lanes.LaneMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"
ASGI_APPLICATION = "example_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def _database() -> dict[str, Any]:
    database: dict[str, Any] = env.db_url(
        "DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
    )
    if database["ENGINE"] == "django.db.backends.sqlite3":
        # The web server and the worker's threads write at once: wait for the
        # lock instead of failing, and let readers go on while one writes.
        database.setdefault("OPTIONS", {}).update(
            {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            }
        )
        Path(database["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    return database


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "game:play"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# -- django-emq -----------------------------------------------------------------

EMQ: dict[str, Any] = {
    # Unset: the embedded Valkey in development (DEBUG), an error otherwise.
    "URL": env.str("EMQ_URL", default=None),
    "EMBEDDED_DIR": VAR_DIR / "emq",
    # Short enough that a killed demo worker's jobs come back quickly.
    "LEASE": env.float("EMQ_LEASE", default=30.0),
    # Set: Prometheus scrapes /emq/metrics with this bearer token (docs/metrics.md).
    "METRICS_TOKEN": env.str("EMQ_METRICS_TOKEN", default=None),
}

TASKS = {
    "default": {
        "BACKEND": "django_emq.backend.FairLanesBackend",
        "QUEUES": ["default"],
    }
}

# -- the game -------------------------------------------------------------------

#: Seconds the scoring task "thinks" per guess: stands in for real work, so a
#: flood takes long enough to watch.
GAME_SCORING_SECONDS: float = env.float("GAME_SCORING_SECONDS", default=0.05)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # django.tasks logs every state change at INFO; the worker's own line per
    # job (lane, job, task, attempt, duration, outcome) says more.
    "loggers": {"django.tasks": {"level": "WARNING"}},
}

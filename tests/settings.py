"""Settings for the test suite (the `emq` fixture points EMQ at the test server)."""

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "django.contrib.staticfiles",  # the admin's CSS, served by live_server
    "django_emq",
    "example_project.game",  # the example project's app, for tests/test_example_*.py
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_emq.lanes.LaneMiddleware",
]
ROOT_URLCONF = "tests.urls"
STATIC_URL = "static/"
# The URL comes from the `emq` fixture (and EMQ_URL, for worker processes).
EMQ: dict[str, object] = {"RETRY_BACKOFF": 0.0, "BEAT": 0.2}
TASKS = {
    "default": {
        "BACKEND": "django_emq.backend.FairLanesBackend",
        "QUEUES": ["default", "other"],
    }
}
LOGGING_CONFIG = None
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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

"""The test settings with Django's default logging left in place (``DEBUG`` on,
no ``LOGGING``): what a project fresh from ``startproject`` has."""

from tests.settings import *  # noqa: F403

DEBUG = True
LOGGING_CONFIG = "logging.config.dictConfig"  # type: ignore[assignment]
LOGGING: dict[str, object] = {}

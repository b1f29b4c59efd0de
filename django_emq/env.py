"""``EMQ`` from the environment, with django-environ's casting: :func:`env_settings`
(also importable as ``django_emq.conf.env_settings``). Which keys are read, and
each one's cast, is the ``env`` of its row in :mod:`django_emq.conf_table`."""

from __future__ import annotations

from typing import Any

from .conf_table import SETTINGS
from .exceptions import ConfigurationError


def env_settings(env: Any = None, prefix: str = "EMQ_") -> dict[str, Any]:
    """``EMQ`` read from the environment with django-environ's casting: each key
    from ``EMQ_<KEY>`` (``EMQ_URL``, ``EMQ_LEASE=60``, ``EMQ_SHARDS=default=3``,
    ``EMQ_LANE_BRANDS=shop.Customer=CUS``), only the variables that are set::

        EMQ = env_settings()                   # in settings.py
        EMQ = {**env_settings(), "LEASE": 60}  # the environment, and a fixed value

    ``env`` is an ``environ.Env`` (a new one by default). A value that does not
    cast raises ``ConfigurationError`` naming the variable. The values are
    validated like any other (system check ``emq.E002``).
    """
    import environ

    env = environ.Env() if env is None else env
    found: dict[str, Any] = {}
    for setting in SETTINGS:
        name = prefix + setting.key
        if setting.env is None or name not in env.ENVIRON:
            continue
        try:
            found[setting.key] = env.get_value(name, cast=setting.env)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"${name} is invalid: {exc}") from None
    return found

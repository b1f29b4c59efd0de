"""``EMQ`` from the environment, with django-environ's casting: :func:`env_settings`
(also importable as ``django_emq.conf.env_settings``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from .exceptions import ConfigurationError

#: ``EMQ`` keys :func:`env_settings` reads, with the django-environ cast of each.
ENV_CASTS: Mapping[str, Any] = MappingProxyType(
    {
        "URL": str,
        "EMBEDDED_DIR": str,
        "LANE_BRANDS": dict,
        "SHARDS": dict,
        **dict.fromkeys(["MAX_ATTEMPTS", "MAX_EXPIRIES", "MAX_PAYLOAD", "PREFETCH"], int),
        **dict.fromkeys(
            ["LEASE", "RESULT_TTL", "RETRY_BACKOFF", "RETRY_BACKOFF_MAX", "BEAT"], float
        ),
        **dict.fromkeys(["ENQUEUE_TIMEOUT", "SHUTDOWN_GRACE"], float),
    }
)


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
    for key, cast in ENV_CASTS.items():
        name = prefix + key
        if name not in env.ENVIRON:
            continue
        try:
            found[key] = env.get_value(name, cast=cast)
            if key == "SHARDS":  # queue name -> shard count
                found[key] = {name: int(count) for name, count in found[key].items()}
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"${name} is invalid: {exc}") from None
    return found

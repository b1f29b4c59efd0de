"""The process's Valkey connection, built lazily from settings.

``EMQ["URL"]`` (or ``EMQ_URL`` in the environment) names the server. One
thread-safe client (and so one connection pool) per process.
"""

from __future__ import annotations

import os
import threading

import redis

from .exceptions import ConfigurationError

_lock = threading.Lock()
_client: redis.Redis | None = None


def configured_url() -> str | None:
    """The URL from ``settings.EMQ["URL"]``, else ``$EMQ_URL``, else ``None``."""
    from django.conf import settings

    emq = getattr(settings, "EMQ", {}) or {}
    return emq.get("URL") or os.environ.get("EMQ_URL") or None


def get_connection() -> redis.Redis:
    """The shared client for the configured server."""
    global _client
    with _lock:
        if _client is None:
            url = configured_url()
            if not url:
                raise ConfigurationError(
                    "no Valkey URL: set EMQ = {'URL': 'redis://localhost:6379/0'} "
                    "or the EMQ_URL environment variable"
                )
            _client = redis.Redis.from_url(url)
        return _client


def reset_connection() -> None:
    """Forget the shared client (settings changed, or after fork)."""
    global _client
    with _lock:
        if _client is not None:
            _client.close()
        _client = None

"""Server URLs: the schemes django-emq accepts, mapped onto redis-py's.

redis-py understands ``redis://``, ``rediss://`` and ``unix://``. Valkey's own
spellings (``valkey://``, ``valkeys://``, ``valkey+unix://``) name the same
connections, so they are rewritten before redis-py parses the URL. Kept apart
from :mod:`django_emq.connection` so settings validation can use it without
building a client.
"""

from __future__ import annotations

import re
from typing import Any

from redis.connection import parse_url

#: The value of ``EMQ["URL"]`` that asks for the embedded server.
EMBEDDED = "embedded"

#: Accepted scheme -> the redis-py scheme it stands for.
SCHEMES: dict[str, str] = {
    "redis": "redis",
    "rediss": "rediss",
    "valkey": "redis",
    "valkeys": "rediss",
    "unix": "unix",
    "redis+unix": "unix",
    "valkey+unix": "unix",
}

_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*")


def normalize_url(url: str) -> str:
    """Rewrite ``url`` to the scheme redis-py expects; ``ValueError`` if unknown."""
    scheme, sep, rest = url.partition("://")
    target = SCHEMES.get(scheme.lower()) if sep else None
    if target is None:
        accepted = ", ".join(f"{s}://" for s in SCHEMES)
        raise ValueError(f"{_redact(url)!r} is not a server URL: use one of {accepted}")
    return f"{target}://{rest}"


def connection_kwargs(url: str) -> dict[str, Any]:
    """The keyword arguments redis-py builds a connection from, for ``url``.

    Raises ``ValueError`` for an unknown scheme or a malformed query value.
    """
    try:
        kwargs: dict[str, Any] = parse_url(normalize_url(url))  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise ValueError(f"{_redact(url)!r}: {exc}") from None
    return kwargs


def _redact(url: str) -> str:
    """``url`` with any password replaced, for error messages."""
    url = _QUERY_PASSWORD.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at:
        return url
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"

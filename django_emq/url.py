"""Server URLs: the schemes django-emq accepts, mapped onto redis-py's.

redis-py understands ``redis://``, ``rediss://`` and ``unix://``. Valkey's own
spellings (``valkey://``, ``valkeys://``, ``valkey+unix://``) name the same
connections, so they are rewritten before redis-py parses the URL. Kept apart
from :mod:`django_emq.connection` so settings validation can use it without
building a client.

A **cluster URL** names a Valkey Cluster: the scheme ``valkey+cluster://``
(or ``valkeys+cluster://`` for TLS; ``redis+cluster://`` and
``rediss+cluster://`` are the same) and one or more seed nodes separated by
commas, e.g. ``valkey+cluster://user:pw@10.0.0.1:6379,10.0.0.2:6379``. The
client learns every other node from the seeds. A cluster has only database 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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

#: Accepted cluster scheme -> the redis-py scheme each seed node is reached by.
CLUSTER_SCHEMES: dict[str, str] = {
    "valkey+cluster": "redis",
    "valkeys+cluster": "rediss",
    "redis+cluster": "redis",
    "rediss+cluster": "rediss",
}

_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&]*")


@dataclass(frozen=True, slots=True)
class ClusterURL:
    """A parsed cluster URL: the seed nodes and the connection options they share."""

    seeds: tuple[tuple[str, int], ...]
    #: redis-py connection keyword arguments (credentials, TLS, timeouts...), no host or port.
    options: dict[str, Any]


def is_cluster_url(url: str) -> bool:
    """Whether ``url`` names a Valkey Cluster (a ``...+cluster://`` scheme)."""
    scheme, sep, _ = url.partition("://")
    return bool(sep) and scheme.lower() in CLUSTER_SCHEMES


def normalize_url(url: str) -> str:
    """Rewrite ``url`` to the scheme redis-py expects; ``ValueError`` if unknown."""
    scheme, sep, rest = url.partition("://")
    target = SCHEMES.get(scheme.lower()) if sep else None
    if target is None:
        accepted = ", ".join(f"{s}://" for s in (*SCHEMES, *CLUSTER_SCHEMES))
        raise ValueError(f"{redact(url)!r} is not a server URL: use one of {accepted}")
    return f"{target}://{rest}"


def parse_cluster_url(url: str) -> ClusterURL:
    """The seed nodes and connection options of a cluster URL.

    ``ValueError`` when a seed is not ``host:port``, when the URL names a
    database other than 0, or when a query value is malformed.
    """
    scheme, _, rest = url.partition("://")
    target = CLUSTER_SCHEMES.get(scheme.lower())
    if target is None:
        raise ValueError(f"{redact(url)!r} is not a cluster URL")
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hosts = netloc.rpartition("@")
    seeds = []
    for seed in hosts.split(","):
        host, colon, port = seed.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"{redact(url)!r}: seed node {seed.strip()!r} is not host:port "
                "(separate several seeds with commas)"
            )
        seeds.append((host.strip("[]"), int(port)))
    first = f"{seeds[0][0]}:{seeds[0][1]}"
    options = connection_kwargs(f"{target}://{userinfo}{at}{first}{tail}")
    if options.pop("db", 0) != 0:
        raise ValueError(f"{redact(url)!r}: a cluster has only database 0")
    for name in ("host", "port"):
        options.pop(name, None)
    return ClusterURL(tuple(seeds), options)


def check_url(url: str) -> None:
    """``ValueError`` naming what is wrong with ``url`` (a server or cluster URL)."""
    if is_cluster_url(url):
        parse_cluster_url(url)
    else:
        connection_kwargs(url)


def connection_kwargs(url: str) -> dict[str, Any]:
    """The keyword arguments redis-py builds a connection from, for ``url``.

    Raises ``ValueError`` for an unknown scheme or a malformed query value.
    """
    try:
        kwargs: dict[str, Any] = parse_url(normalize_url(url))  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise ValueError(f"{redact(url)!r}: {exc}") from None
    return kwargs


def redact(url: str) -> str:
    """``url`` with any password replaced, for error messages."""
    url = _QUERY_PASSWORD.sub(r"\1***", url)
    scheme, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at:
        return url
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"

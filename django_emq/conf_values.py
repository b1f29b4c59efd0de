"""The parsers of ``EMQ`` setting values, one per kind: each takes the raw
value and answers the parsed one, or raises ``ValueError`` saying what is
wrong (the caller names the key). The table of settings
(:mod:`django_emq.conf_table`) names one per key."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .engine.ids import BRAND_RE, JOB_BRAND, validate_queue_name
from .engine.placement import MAX_SHARDS, shard_tags
from .url import EMBEDDED, check_url

#: The environment variable read when ``EMQ["URL"]`` is not set.
URL_ENV = "EMQ_URL"

#: The brand of the user model's lanes unless ``LANE_BRANDS`` says otherwise.
USER_BRAND = "USR"

#: The key of a per-queue setting that applies to every queue it does not name.
ALL_QUEUES = "*"

_MODEL_LABEL_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*")


def token(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) < 16:
        raise ValueError("must be a string of at least 16 characters (a random secret)")
    return value


def url(value: object) -> str | None:
    """A server URL (see :mod:`django_emq.url`), ``"embedded"``, or ``None``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    if value == EMBEDDED:
        return value
    try:
        check_url(value)
    except ValueError as exc:
        raise ValueError(f"is invalid: {exc}") from None
    return value


def url_from_environment() -> str | None:
    """``$EMQ_URL``, the URL when ``EMQ["URL"]`` is not set (``None`` if unset too)."""
    return os.environ.get(URL_ENV) or None


def default_embedded_dir() -> Path:
    from django.conf import settings

    base = getattr(settings, "BASE_DIR", None)
    return (Path(base) if base else Path.cwd()) / "var" / "emq"


def path_value(value: object) -> Path:
    """An absolute path: a relative one is taken from ``BASE_DIR`` (else the cwd).

    Absolute, so every process of the project agrees on it whatever its cwd.
    """
    from django.conf import settings

    if not isinstance(value, (str, os.PathLike)) or not str(value):
        raise ValueError(f"must be a path, not {value!r}")
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    base = getattr(settings, "BASE_DIR", None)
    return (Path(base) if base else Path.cwd()) / path


def brands(value: object) -> Mapping[str, str]:
    """Model label -> brand, the user model (``AUTH_USER_MODEL``) branded
    :data:`USER_BRAND` unless ``value`` says otherwise."""
    from django.conf import settings

    user_label = str(getattr(settings, "AUTH_USER_MODEL", "auth.User"))
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a dict of model label -> brand, not {type(value).__name__}")
    brands = {user_label.lower(): USER_BRAND}
    seen: set[str] = set()
    for label, brand in value.items():
        if not isinstance(label, str) or not _MODEL_LABEL_RE.fullmatch(label):
            raise ValueError(f"key {label!r} is not a model label like 'app_label.ModelName'")
        if label.lower() in seen:
            raise ValueError(f"names model {label!r} twice")
        seen.add(label.lower())
        if not isinstance(brand, str) or not BRAND_RE.fullmatch(brand):
            raise ValueError(f"brand {brand!r} of {label!r} is not three upper-case letters A-Z")
        if brand == JOB_BRAND:
            raise ValueError(f"brand {brand!r} of {label!r} is reserved for job ids")
        brands[label.lower()] = brand
    by_brand: dict[str, str] = {}
    for label, brand in brands.items():
        if brand in by_brand:
            raise ValueError(
                f"gives brand {brand!r} to both {by_brand[brand]!r} and {label!r}: "
                "two models would share lanes"
            )
        by_brand[brand] = label
    return MappingProxyType(brands)


def int_values(text: str) -> dict[str, int]:
    """``"default=3,reports=2"`` -> ``{"default": 3, "reports": 2}`` (an
    environment variable's dict of counts; ``ValueError`` for a count that is
    not a whole number)."""
    pairs = [item.split("=", 1) for item in text.split(",") if item]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"{text!r} is not a list of name=count")
    return {name: int(count) for name, count in pairs}


def shards(value: object) -> Mapping[str, int]:
    """``{"queue name": shard count}``; a count of 1 is a plain queue."""
    if not isinstance(value, Mapping):
        raise ValueError(f"must be a dict of queue name -> shard count, not {type(value).__name__}")
    shards: dict[str, int] = {}
    for name, count in value.items():
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"gives queue {name!r} {count!r} shards: use 1 to {MAX_SHARDS}")
        try:
            shard_tags(name, count)  # the queue name and every shard's tag are valid names
        except ValueError as exc:
            raise ValueError(f"names queue {name!r}: {exc}") from None
        if count > 1:
            shards[name] = count
    return MappingProxyType(shards)


def to_seconds(value: object) -> float:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number of seconds or a timedelta, not {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"must be a finite number of seconds, not {value!r}")
    return float(value)


def duration(value: object) -> float:
    seconds = to_seconds(value)
    if seconds < 0:
        raise ValueError(f"must not be negative, not {value!r}")
    return seconds


def positive_duration(value: object) -> float:
    seconds = to_seconds(value)
    if seconds <= 0:
        raise ValueError(f"must be more than zero seconds, not {value!r}")
    return seconds


_TENANT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def tenant_source(value: object) -> str | None:
    """``EMQ["TENANT"]``: an attribute name of a lane's owner (``"organization"``)
    or the dotted path of a callable owner -> tenant (``"app.tenants.org_of"``)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _TENANT_RE.fullmatch(value):
        raise ValueError(
            "must be an attribute name of a lane's owner or the dotted path of a "
            f"callable owner -> tenant, not {value!r}"
        )
    return value


def at_most(limit: float, parse: Callable[[Any], Any], unit: str = "") -> Callable[[Any], Any]:
    """``parse``, refusing a value above ``limit`` (``unit`` follows the limit
    in the message: ``" seconds (24 hours)"``)."""

    def bounded(value: object) -> Any:
        parsed = parse(value)
        if parsed > limit:
            shown = str(limit) if isinstance(limit, int) else f"{limit:g}"
            raise ValueError(f"must be at most {shown}{unit}, not {value!r}")
        return parsed

    return bounded


def at_least(limit: float, parse: Callable[[Any], Any], unit: str = "") -> Callable[[Any], Any]:
    """``parse``, refusing a value below ``limit`` (``unit`` follows the limit
    in the message, as for :func:`at_most`)."""

    def bounded(value: object) -> Any:
        parsed = parse(value)
        if parsed < limit:
            raise ValueError(f"must be at least {limit:g}{unit}, not {value!r}")
        return parsed

    return bounded


def optional_positive_int(value: object) -> int | None:
    return None if value is None else positive_int(value)


def positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be a whole number of at least 1, not {value!r}")
    return value


def per_queue(value: object, *, parse: Callable[[Any], Any]) -> Mapping[str, Any]:
    """A value for every queue, or ``{"queue name" or "*": value}``."""
    if not isinstance(value, Mapping):
        value = {ALL_QUEUES: value}
    parsed: dict[str, Any] = {}
    for name, item in value.items():
        if name != ALL_QUEUES:
            try:
                validate_queue_name(name)
            except ValueError as exc:
                raise ValueError(f"names queue {name!r}: {exc}") from None
        try:
            parsed[name] = parse(item)
        except ValueError as exc:
            raise ValueError(f"for queue {name!r} {exc}") from None
    return MappingProxyType(parsed)

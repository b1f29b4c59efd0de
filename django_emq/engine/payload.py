"""Job payloads are JSON, never pickle: encoded and checked before any write."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .exceptions import InvalidArguments

#: Default ceiling on the encoded size of one job's arguments (1 MiB).
DEFAULT_MAX_PAYLOAD = 1024 * 1024


def _dumps(value: Any) -> str:
    """Compact JSON text of ``value``; ``InvalidArguments`` names what cannot be
    encoded: what JSON cannot hold, NaN, nesting deeper than Python can walk,
    text that UTF-8 cannot carry (a lone surrogate)."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise InvalidArguments("nested too deeply to encode as JSON") from None
    except (TypeError, ValueError) as exc:
        raise InvalidArguments(f"must be JSON-serialisable: {exc}") from None
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end]
            raise InvalidArguments(
                f"holds text UTF-8 cannot carry ({bad!r} at {exc.start}: a lone surrogate)"
            ) from None
    return text


def encode_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any] | None, max_bytes: int = DEFAULT_MAX_PAYLOAD
) -> tuple[str, str]:
    """Encode positional and keyword arguments as JSON text.

    Refuses (``InvalidArguments``) what would not come back equal from a JSON
    round trip — objects JSON cannot hold, NaN, non-string keys — and payloads
    over ``max_bytes`` once encoded.
    """
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise InvalidArguments(f"args must be a list or tuple, not {type(args).__name__}")
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(kwargs, Mapping):
        raise InvalidArguments(f"kwargs must be a dict, not {type(kwargs).__name__}")
    bad_keys = [key for key in kwargs if not isinstance(key, str)]
    if bad_keys:
        raise InvalidArguments(f"keyword argument names must be strings, not {bad_keys[0]!r}")
    try:
        args_json = _dumps(list(args))
        kwargs_json = _dumps(dict(kwargs))
        same = json.loads(args_json) == _normalise(list(args)) and json.loads(
            kwargs_json
        ) == _normalise(dict(kwargs))
    except InvalidArguments as exc:
        raise InvalidArguments(f"task arguments {exc}") from None
    except RecursionError:
        raise InvalidArguments("task arguments are nested too deeply to encode as JSON") from None
    if not same:
        raise InvalidArguments(
            "task arguments must survive a JSON round trip unchanged "
            "(dict keys must be strings; use lists, dicts, str, int, float, bool, None)"
        )
    size = len(args_json.encode()) + len(kwargs_json.encode())
    if size > max_bytes:
        raise InvalidArguments(
            f"task arguments are {size} bytes as JSON, over the {max_bytes}-byte limit "
            "(EMQ['MAX_PAYLOAD']); pass an id and load the data in the task instead"
        )
    return args_json, kwargs_json


def _normalise(value: Any) -> Any:
    """What a JSON round trip should give back: tuples become lists."""
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    return value


class JSONText(str):
    """JSON text :func:`encode_result` made: passed through as is, never encoded twice."""


def encode_result(value: Any, max_bytes: int | None = None) -> JSONText:
    """Encode a task's return value; refuses (``InvalidArguments``) what JSON
    cannot hold or Valkey cannot take: NaN and infinities, objects JSON does not
    know, nesting deeper than the encoder recurses, text that is not valid
    Unicode (a lone surrogate), and, given ``max_bytes``, a result larger than
    that once encoded. Text it made before (a :class:`JSONText`) comes back
    unchanged, so a worker that checks a value by encoding it does not pay for
    a second encoding when it records it."""
    if isinstance(value, JSONText):
        return value
    try:
        encoded = _dumps(value)
    except InvalidArguments as exc:
        raise InvalidArguments(f"a task's return value {exc}") from None
    if max_bytes is not None:
        size = len(encoded.encode())
        if size > max_bytes:
            raise InvalidArguments(
                f"a task's return value is {size} bytes as JSON, over the {max_bytes}-byte "
                "limit (EMQ['MAX_PAYLOAD']); store it elsewhere and return a reference to it"
            )
    return JSONText(encoded)


def encode_meta(meta: Mapping[str, Any], max_bytes: int = DEFAULT_MAX_PAYLOAD) -> str:
    """Encode a job's ``meta`` (what the enqueue keeps beside its arguments: the
    backend alias, a schedule's tick, the caller's own); ``InvalidArguments``
    says it is the meta that JSON cannot hold, or that it is over ``max_bytes``
    once encoded (the same limit as the arguments', counted on its own)."""
    if not isinstance(meta, Mapping):
        raise InvalidArguments(f"job meta must be a dict, not {type(meta).__name__}")
    try:
        encoded = _dumps(dict(meta))
    except InvalidArguments as exc:
        raise InvalidArguments(f"job meta {exc}") from None
    size = len(encoded.encode())
    if size > max_bytes:
        raise InvalidArguments(
            f"job meta is {size} bytes as JSON, over the {max_bytes}-byte limit "
            "(EMQ['MAX_PAYLOAD']); keep a reference in it instead"
        )
    return encoded


def text(value: Any) -> str:
    """A field read from Valkey as text; bytes that are not UTF-8 (a row edited by
    hand) show as U+FFFD instead of raising."""
    return value.decode(errors="replace") if type(value) is bytes else str(value)


def decode(text: str | bytes | None) -> Any:
    """Decode JSON text kept on a job row (``None`` stays ``None``). The rows hold
    UTF-8 (bytes that are not raise ``ValueError``); empty arguments, the most
    common ones, skip the parser (every claimed job passes through here)."""
    if not text:
        return None
    if isinstance(text, bytes):
        if text == b"[]":
            return []
        if text == b"{}":
            return {}
        text = text.decode()
    try:  # the parser's scanner alone: the rows hold compact JSON, no space around it
        value, end = _scan(text, 0)
    except StopIteration:  # not a JSON value where it starts: json.loads says why
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


#: What ``json.loads`` runs once it has skipped leading space (and after which it
#: checks that only space is left): a row's JSON has none, so :func:`decode`
#: calls it directly and leaves anything else to ``json.loads``.
_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]

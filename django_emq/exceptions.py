"""Every exception django-emq raises: the engine's, and the Django layer's own."""

from __future__ import annotations

from .engine.exceptions import (
    BAD_STATE,
    LANE_FULL,
    NO_JOB,
    STALE_TOKEN,
    UNAVAILABLE,
    CorruptJob,
    CorruptKeyspace,
    EMQError,
    EnqueueError,
    InvalidArguments,
    InvalidJobState,
    JobCancelled,
    JobError,
    JobNotFound,
    LaneFull,
    LeaseExpired,
    ScriptError,
    StaleToken,
    check_code,
    refusal,
    script_error,
)


class ConfigurationError(EMQError):
    """The EMQ settings or the Valkey server cannot be used as configured."""


__all__ = [
    "BAD_STATE",
    "LANE_FULL",
    "NO_JOB",
    "STALE_TOKEN",
    "UNAVAILABLE",
    "ConfigurationError",
    "CorruptJob",
    "CorruptKeyspace",
    "EMQError",
    "EnqueueError",
    "InvalidArguments",
    "InvalidJobState",
    "JobCancelled",
    "JobError",
    "JobNotFound",
    "LaneFull",
    "LeaseExpired",
    "ScriptError",
    "StaleToken",
    "check_code",
    "refusal",
    "script_error",
]

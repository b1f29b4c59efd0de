"""Which lane a job rides: ``lane_for(obj)``, the current lane, ``enqueue_for``;
and which tenant the lane belongs to (``tenant_for``, docs/tenants.md).

A lane id is the producer's brand plus its primary key in fixed-width base62
(``USR`` + base62(42) for the user with pk 42). The current lane lives in a
context variable, so it follows threads and async tasks correctly; the
backend reads it when a plain ``task.enqueue(...)`` is called.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

from .conf import emq_settings
from .engine.ids import BRAND_RE, lane_id, validate_lane, validate_tenant
from .engine.records import unique_key_arg

if TYPE_CHECKING:
    from django.tasks import Task, TaskResult

_current_lane: ContextVar[str | None] = ContextVar("emq_lane", default=None)
_current_unique: ContextVar[str | None] = ContextVar("emq_unique_key", default=None)
_current_tenant: ContextVar[str | None] = ContextVar("emq_tenant", default=None)

USER_BRAND = "USR"


def brand_for(model: type[models.Model]) -> str:
    """The brand of ``model``'s lanes: ``EMQ["LANE_BRANDS"]["app.Model"]``, ``USR``
    for the user model, else the first three letters of the model name."""
    concrete = model._meta.concrete_model or model
    brand = emq_settings().lane_brands.get(concrete._meta.label.lower())
    if brand is not None:
        return brand
    if concrete is get_user_model()._meta.concrete_model:
        return USER_BRAND
    letters = "".join(c for c in model.__name__.upper() if "A" <= c <= "Z")
    brand = (letters + "XXX")[:3]
    assert BRAND_RE.fullmatch(brand)
    return brand


def lane_for(obj: object) -> str:
    """The lane id of a user or any saved model instance.

    Refuses (``ValueError``) an anonymous user, an unsaved instance, or a pk
    that is not an integer or UUID — before anything is written.
    """
    if getattr(obj, "is_anonymous", False) is True:
        raise ValueError(
            "an anonymous user has no lane: enqueue for a signed-in user, or pick a "
            "lane yourself with django_emq.lane(...)"
        )
    if not isinstance(obj, models.Model):
        raise ValueError(f"lane_for() takes a saved model instance, not {type(obj).__name__}")
    if obj._state.adding or obj.pk is None:
        raise ValueError(f"{obj.__class__.__name__} instance is not saved: it has no lane yet")
    pk = obj.pk
    if isinstance(pk, uuid.UUID):
        return lane_id(brand_for(obj.__class__), pk.int, wide=True)
    if isinstance(pk, int) and not isinstance(pk, bool):
        number = pk
    else:
        raise ValueError(
            f"{type(obj).__name__} has a {type(pk).__name__} primary key; lanes need an "
            "integer or UUID key"
        )
    return lane_id(brand_for(obj.__class__), number)  # __class__: sees through lazy users


def current_lane() -> str | None:
    """The lane set by ``lane(...)``, the middleware or ``enqueue_for``; else ``None``."""
    return _current_lane.get()


def tenant_id(target: object) -> str:
    """A tenant id from a tenant id string or a saved model instance (an
    organisation, a team: branded like a lane, ``EMQ["LANE_BRANDS"]``)."""
    if isinstance(target, str):
        return validate_tenant(target)
    return lane_for(target)


def tenant_for(owner: object) -> str | None:
    """The tenant of a lane's owner as ``EMQ["TENANT"]`` derives it (an attribute
    name of the owner, or the dotted path of a callable owner -> tenant);
    ``None`` when the setting is unset or the owner has no tenant."""
    source = emq_settings().tenant
    if source is None or isinstance(owner, str):
        return None
    found = import_string(source)(owner) if "." in source else getattr(owner, source, None)
    return None if found is None else tenant_id(found)


def current_tenant() -> str | None:
    """The tenant set by ``enqueue_for(..., tenant=...)``, ``lane(...)`` (through
    ``EMQ["TENANT"]``) or the middleware; else ``None`` (the lane's recorded
    tenant holds)."""
    return _current_tenant.get()


def current_unique_key() -> str | None:
    """The unique key ``enqueue_for(..., unique_key=...)`` or ``unique(...)`` set; else ``None``."""
    return _current_unique.get()


@contextmanager
def unique(key: str | None) -> Iterator[None]:
    """Run the block with ``key`` as the unique key of the jobs it enqueues: at
    most one unfinished job per key and lane (see docs/unique-jobs.md)::

        with lane(request.user), unique(f"report:{report.pk}"):
            build_report.enqueue(report.pk)
    """
    token = _current_unique.set(unique_key_arg(key) or None)
    try:
        yield
    finally:
        _current_unique.reset(token)


def _resolve(target: object) -> str:
    if isinstance(target, str):
        return validate_lane(target)
    return lane_for(target)


@contextmanager
def lane(target: object) -> Iterator[str]:
    """Run the block with ``target``'s lane as the current lane.

    ``target`` is a lane id or anything ``lane_for`` accepts::

        with lane(request.user):
            score_guess.enqueue(guess.pk)
    """
    token = _current_lane.set(_resolve(target))
    owner = _current_tenant.set(tenant_for(target) or _current_tenant.get())
    try:
        yield _current_lane.get() or ""
    finally:
        _current_tenant.reset(owner)
        _current_lane.reset(token)


@contextmanager
def tenant(target: object) -> Iterator[str]:
    """Run the block with ``target`` (a tenant id or a saved instance) as the
    tenant of the lanes its jobs ride (docs/tenants.md)."""
    token = _current_tenant.set(tenant_id(target))
    try:
        yield _current_tenant.get() or ""
    finally:
        _current_tenant.reset(token)


def enqueue_for(
    target: object,
    task: Task[Any, Any],
    *args: Any,
    unique_key: str | None = None,
    tenant: object = None,
    **kwargs: Any,
) -> TaskResult[Any, Any]:
    """Enqueue ``task`` on ``target``'s lane (a user, a saved instance or a lane id).

    With ``tenant`` (a tenant id or a saved instance, e.g. the user's
    organisation), the lane belongs to that tenant: workers rotate across
    tenants first, then across each tenant's lanes (docs/tenants.md). Without
    it, ``EMQ["TENANT"]`` derives the tenant from ``target``, if set.

    With ``unique_key``, at most one unfinished job per key rides the lane: while
    one is pending, scheduled or running, this answers that job's result and
    enqueues nothing. Raises ``django_emq.exceptions.LaneFull`` (nothing written)
    when the lane holds its max depth; a view answers it with HTTP 429::

        try:
            enqueue_for(request.user, build_report, report.pk)
        except LaneFull:
            return HttpResponse("Too many reports waiting.", status=429)
    """
    with lane(target), unique(unique_key):
        if tenant is None:
            return task.enqueue(*args, **kwargs)
        with _tenant_of(tenant):
            return task.enqueue(*args, **kwargs)


_tenant_of = tenant


def enqueue_on_commit(
    target: object,
    task: Task[Any, Any],
    *args: Any,
    unique_key: str | None = None,
    tenant: object = None,
    **kwargs: Any,
) -> None:
    """Enqueue ``task`` on ``target``'s lane once the current transaction commits.

    The lane and the arguments are checked now, at the call site; the job is
    written after the commit (and never if the transaction rolls back), so no
    result id exists until then — this returns ``None``.
    """
    lane_id_ = _resolve(target)
    unique_key_arg(unique_key)
    tenant_ = tenant_id(tenant) if tenant is not None else tenant_for(target)
    backend = task.get_backend()
    check = getattr(backend, "check_arguments", None)
    if check is not None:
        check(task, args, kwargs)
    transaction.on_commit(
        lambda: enqueue_for(lane_id_, task, *args, unique_key=unique_key, tenant=tenant_, **kwargs)
    )


class LaneMiddleware:
    """Set the current lane from ``request.user`` for the rest of the request.

    Put it after ``AuthenticationMiddleware``. Anonymous requests get no lane,
    so an enqueue without one fails loudly instead of riding a shared lane.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        token = _current_lane.set(lane_for(user))
        owner = _current_tenant.set(tenant_for(user))
        try:
            return self.get_response(request)
        finally:
            _current_tenant.reset(owner)
            _current_lane.reset(token)

"""Finding queues and lanes by what an operator knows: the queues in
``TASKS``, a user's username or email, the user behind a user lane.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import Q
from django.urls import reverse

from ..backend import configured_queues
from ..engine.ids import unbase62, validate_lane
from ..lanes import brand_for, lane_for

__all__ = ["configured_queues", "lane_links", "lane_owners", "lanes_named_by", "user_lanes"]


def lane_owners(lanes: Sequence[str]) -> dict[str, str]:
    """The user each user lane belongs to, by lane (one database query)."""
    user_model = get_user_model()
    brand = brand_for(user_model)
    uuid_pk = isinstance(user_model._meta.pk, models.UUIDField)
    pks: dict[Any, str] = {}
    for lane in lanes:
        if lane[:3] != brand:
            continue
        try:
            number = unbase62(lane[3:])
        except ValueError:  # no lane (a row edited by hand): no owner
            continue
        if not uuid_pk:
            pks[number] = lane
        elif number < 1 << 128:
            pks[uuid.UUID(int=number)] = lane
    if not pks:
        return {}
    users = user_model._default_manager.filter(pk__in=list(pks))
    return {pks[user.pk]: user.get_username() for user in users if user.pk in pks}


def user_lanes(query: str, limit: int) -> list[str]:
    """The lanes of the users whose username or email is ``query`` (any case)."""
    user_model = get_user_model()
    match = Q(**{f"{user_model.USERNAME_FIELD}__iexact": query})
    email = user_model.get_email_field_name()
    if email in {field.name for field in user_model._meta.get_fields()}:
        match |= Q(**{f"{email}__iexact": query})
    users = user_model._default_manager.filter(match).order_by("pk")[:limit]
    return list(dict.fromkeys(lane_for(user) for user in users))


def lanes_named_by(query: str, limit: int) -> list[str]:
    """The lane ``query`` names: itself when it is a lane id, else the lanes of
    the users (at most ``limit``) whose username or email it is."""
    try:
        return [validate_lane(query)]
    except ValueError:
        return user_lanes(query, limit)


def lane_links(lanes: Sequence[str], admin_site: Any) -> dict[str, dict[str, str | None]]:
    """The user behind each user lane, with a link to its admin page when the
    site has one (``url`` is ``None`` otherwise); one database query."""
    user_model = get_user_model()
    names = lane_owners(lanes)
    if not names:
        return {}
    registered = user_model in admin_site._registry
    field = user_model.USERNAME_FIELD
    users = {
        user.get_username(): user.pk
        for user in user_model._default_manager.filter(**{f"{field}__in": list(names.values())})
    }
    meta = user_model._meta
    links: dict[str, dict[str, str | None]] = {}
    for lane, name in names.items():
        url = None
        if registered and name in users:
            url = reverse(
                f"admin:{meta.app_label}_{meta.model_name}_change",
                args=[users[name]],
                current_app=admin_site.name,
            )
        links[lane] = {"label": name, "url": url}
    return links

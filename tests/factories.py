"""factory-boy factories for the tests' Django data, with typed helpers."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from factory.declarations import LazyAttribute, Sequence
from factory.django import DjangoModelFactory


class UserFactory(DjangoModelFactory[User]):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = Sequence(lambda n: f"user{n}")  # type: ignore[no-untyped-call]
    email = LazyAttribute(lambda u: f"{u.username}@example.com")  # type: ignore[no-untyped-call]


def make_user(**fields: Any) -> User:
    """A saved user (``fields`` override the factory's)."""
    return UserFactory.create(**fields)

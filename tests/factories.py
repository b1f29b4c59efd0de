"""Test data, made by factory-boy: users (staff, with lane permissions),
players of the example game, their rounds and guesses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import factory
from django.contrib.auth.models import Permission, User

from example_project.game.models import Guess, Round


def _grant(user: User, create: bool, codenames: Sequence[str] | None, **kwargs: Any) -> None:
    """Grant the permissions with these codenames (``view_lanes``, ``manage_lanes``)."""
    if create and codenames:
        user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))


class UserFactory(factory.django.DjangoModelFactory[User]):
    """A user with no usable password (nothing to hash) unless ``password=`` is given.

    ``UserFactory(username="ada")``, ``UserFactory(staff=True, perms=["view_lanes"])``.
    """

    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password(None)
    is_staff = False

    class Params:
        staff = factory.Trait(is_staff=True)

    perms = factory.PostGeneration(_grant)


#: A player of the example game is a user.
PlayerFactory = UserFactory


class RoundFactory(factory.django.DjangoModelFactory[Round]):
    class Meta:
        model = Round

    player = factory.SubFactory(PlayerFactory)


class GuessFactory(factory.django.DjangoModelFactory[Guess]):
    """An unscored guess of a player in their open round."""

    class Meta:
        model = Guess

    player = factory.SubFactory(PlayerFactory)
    round = factory.LazyAttribute(lambda g: Round.current_for(g.player))
    code = factory.Sequence(lambda n: f"{n % 10000:04d}")


# Typed front doors (factory-boy's factories are untyped).


def make_user(
    username: str | None = None,
    *,
    staff: bool = False,
    perms: Sequence[str] = (),
    password: str | None = None,
) -> User:
    """A saved user (see ``UserFactory``)."""
    kwargs: dict[str, Any] = {"is_staff": staff, "perms": list(perms)}
    if username is not None:
        kwargs["username"] = username
    if password is not None:
        kwargs["password"] = password
    return cast(User, UserFactory(**kwargs))


def make_player(username: str | None = None) -> User:
    """A player of the example game."""
    return make_user(username)


def make_guess(player: User | None = None, code: str | None = None) -> Guess:
    """An unscored guess in the player's open round."""
    kwargs: dict[str, Any] = {}
    if player is not None:
        kwargs["player"] = player
    if code is not None:
        kwargs["code"] = code
    return cast(Guess, GuessFactory(**kwargs))

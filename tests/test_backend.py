"""The django.tasks backend, enqueue_for and lanes: in-process, against the real server."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.tasks import TaskResultStatus, task, task_backends
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.test import Client
from django.utils import timezone

from django_emq import enqueue_for, enqueue_on_commit, lane, lane_for, lane_id
from django_emq.backend import FairLanesBackend
from django_emq.exceptions import InvalidArguments
from tests import tasks
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def backend() -> FairLanesBackend:
    b = task_backends["default"]
    assert isinstance(b, FairLanesBackend)
    return b


@pytest.fixture
def user() -> User:
    user: User = make_user("ada")
    return user


def test_lane_for_a_user_is_usr_plus_fixed_width_base62(user: User) -> None:
    assert lane_for(user) == lane_id("USR", user.pk)
    assert len(lane_for(user)) == 14


def test_lane_for_refuses_anonymous_and_unsaved(emq: redis.Redis) -> None:
    with pytest.raises(ValueError, match="anonymous"):
        lane_for(AnonymousUser())
    with pytest.raises(ValueError, match="not saved"):
        lane_for(User(username="ghost"))
    with pytest.raises(ValueError, match="model instance"):
        lane_for("USR")
    assert emq.dbsize() == 0


def test_lane_brand_is_configurable(user: User, settings: Any) -> None:
    settings.EMQ = {**settings.EMQ, "LANE_BRANDS": {"auth.User": "PLR"}}
    assert lane_for(user) == lane_id("PLR", user.pk)


def test_enqueue_for_writes_the_job_on_the_users_lane(emq: redis.Redis, user: User) -> None:
    result = enqueue_for(user, tasks.add, 2, 3)
    assert result.status == TaskResultStatus.READY
    row = backend().queue("default").job(result.id)
    assert row is not None
    assert row["group"] == lane_for(user)
    assert row["task"] == "tests.tasks.add"
    assert backend().queue("default").depth(lane_for(user)) == 1


def test_enqueue_without_a_lane_is_refused_and_writes_nothing(emq: redis.Redis) -> None:
    with pytest.raises(InvalidTask, match="enqueue_for"):
        tasks.add.enqueue(1, 2)
    assert emq.dbsize() == 0


def test_enqueue_for_anonymous_writes_nothing(emq: redis.Redis) -> None:
    with pytest.raises(ValueError, match="anonymous"):
        enqueue_for(AnonymousUser(), tasks.add, 1, 2)
    assert emq.dbsize() == 0


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((object(),), {}), ((), {"x": {1, 2}}), ((float("nan"),), {}), (({1: "a"},), {})],
)
def test_arguments_that_do_not_survive_json_are_refused(
    emq: redis.Redis, user: User, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with pytest.raises((InvalidArguments, TypeError, ValueError)):
        enqueue_for(user, tasks.record, *args, **kwargs)
    assert emq.dbsize() == 0


def test_numeric_priority_is_refused_pointing_to_weights(emq: redis.Redis) -> None:
    with pytest.raises(InvalidTask, match="weight"):
        task(priority=5)(tasks.add.func)


def test_lane_context_manager_sets_the_lane_for_plain_enqueue(emq: redis.Redis, user: User) -> None:
    with lane(user) as current:
        result = tasks.add.enqueue(1, 1)
    assert current == lane_for(user)
    row = backend().queue("default").job(result.id)
    assert row is not None
    assert row["group"] == current
    with pytest.raises(InvalidTask):
        tasks.add.enqueue(1, 1)


def test_lane_accepts_a_lane_id_and_refuses_a_bad_one(emq: redis.Redis) -> None:
    with lane("TEA00000000007"):
        tasks.add.enqueue(1, 1)
    with pytest.raises(ValueError, match="not a lane id"):
        lane("TEA}{").__enter__()
    assert backend().queue("default").depth("TEA00000000007") == 1


def test_middleware_sets_the_lane_from_request_user(emq: redis.Redis, user: User) -> None:
    client = Client()
    client.force_login(user)
    response = client.get("/enqueue/")
    job_id = response.json()["id"]
    row = backend().queue("default").job(job_id)
    assert row is not None
    assert row["group"] == lane_for(user)


def test_middleware_gives_anonymous_requests_no_lane(emq: redis.Redis) -> None:
    client = Client(raise_request_exception=True)
    with pytest.raises(InvalidTask):
        client.get("/enqueue/")
    assert emq.dbsize() == 0


def test_run_after_makes_the_job_scheduled(emq: redis.Redis, user: User) -> None:
    later = tasks.add.using(run_after=timezone.now() + timedelta(minutes=5))
    result = enqueue_for(user, later, 1, 2)
    row = backend().queue("default").job(result.id)
    assert row is not None
    assert row["state"] == "scheduled"
    assert backend().get_result(result.id).status == TaskResultStatus.READY


def test_a_run_after_long_past_runs_now(emq: redis.Redis, user: User) -> None:
    """Django's ``run_after`` is the earliest a task may run: three days ago is
    now (the engine refuses a time that stale; the backend follows Django, whose
    base backend checks only that it is aware). The result keeps the caller's
    ``run_after``."""
    past = timezone.now() - timedelta(days=3)
    result = enqueue_for(user, tasks.add.using(run_after=past), 1, 2)
    row = backend().queue("default").job(result.id)
    assert row is not None
    assert row["state"] == "pending"
    assert result.task.run_after == past
    assert backend().get_result(result.id).task.run_after == past


def test_queue_name_is_honoured(emq: redis.Redis, user: User) -> None:
    result = enqueue_for(user, tasks.add.using(queue_name="other"), 1, 2)
    assert backend().queue("other").job(result.id) is not None
    assert backend().queue("default").job(result.id) is None
    assert backend().get_result(result.id).id == result.id


def test_enqueue_answers_the_enqueue_time_a_read_gives(emq: redis.Redis, user: User) -> None:
    """The result enqueue returns carries the server's clock (the script's reply),
    so it equals the result read back: enqueued_at included, deferred jobs too."""
    later = tasks.add.using(run_after=timezone.now() + timedelta(minutes=5))
    for task_ in (tasks.add, later):
        result = enqueue_for(user, task_, 1, 2)
        row = backend().queue("default").job(result.id)
        assert row is not None
        read = backend().get_result(result.id)
        assert result.enqueued_at == read.enqueued_at
        assert result.enqueued_at is not None
        assert int(result.enqueued_at.timestamp() * 1000) == int(row["enq"])
        assert result == read


def test_bulk_enqueue_answers_each_rows_enqueue_time(emq: redis.Redis) -> None:
    """``enqueue_many`` answers each job's enqueue time as its row holds it."""
    queue = backend().queue("default")
    answers = queue.enqueue_many(
        [{"lane": lane_id("USR", pk), "task_path": tasks.add.module_path} for pk in (1, 2, 3)]
    )
    for answer in answers:
        row = queue.job(answer.job_id)
        assert row is not None
        assert answer.enqueued_ms == int(row["enq"]) > 0


def test_get_result_of_an_unknown_id_raises(emq: redis.Redis) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        backend().get_result("JOBnothere")
    with pytest.raises(TaskResultDoesNotExist):
        backend().get_result("bad id }")


def test_task_enqueued_signal_fires(emq: redis.Redis, user: User) -> None:
    seen: list[str] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        result = enqueue_for(user, tasks.add, 1, 2)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [result.id]


@pytest.mark.django_db(transaction=True)
def test_on_commit_enqueues_only_after_the_commit(emq: redis.Redis) -> None:
    user = make_user("bo")
    with transaction.atomic():
        enqueue_on_commit(user, tasks.add, 1, 2)
        assert backend().queue("default").depth(lane_for(user)) == 0
    assert backend().queue("default").depth(lane_for(user)) == 1


@pytest.mark.django_db(transaction=True)
def test_on_commit_rolled_back_enqueues_nothing(emq: redis.Redis) -> None:
    user = make_user("cy")
    try:
        with transaction.atomic():
            enqueue_on_commit(user, tasks.add, 1, 2)
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert backend().queue("default").depth(lane_for(user)) == 0


def test_on_commit_checks_arguments_at_the_call_site(emq: redis.Redis, user: User) -> None:
    with pytest.raises(InvalidArguments):
        enqueue_on_commit(user, tasks.record, object())

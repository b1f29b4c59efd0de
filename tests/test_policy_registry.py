"""The lane policies' extension point, walked: every policy is one module of
``django_emq/engine/policies/`` registered by one line, its keys are typed
where the doctor reads them, its docs page and Lua exist, its settings are
documented, the Lua probe list is generated from it, and its calls reach
both queue classes through the registry alone (docs/architecture.md,
"Adding a policy")."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pytest

from django_emq.conf_table import BY_KEY
from django_emq.engine import Queue, ShardedQueue, lane_id
from django_emq.engine.keys import QueueKeys
from django_emq.engine.keyspace import CORE_KEY_TYPES, FIXED_KEY_TYPES, expected_type
from django_emq.engine.policies import POLICIES, PolicyCalls, probe
from django_emq.engine.policies.base import Policy, Routed

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_emq" / "engine" / "policies"
LUA = ROOT / "django_emq" / "engine" / "lua"
DOCS = ROOT / "docs"
#: The package's modules that are no policy: the extension point and the generator.
NOT_POLICIES = {"__init__", "base", "probe"}
TYPES = {"string", "list", "set", "zset", "hash"}
KEYS = QueueKeys("q")
LANE = lane_id("USR", 1)

BY_NAME = {policy.name: policy for policy in POLICIES}
ids = [policy.name for policy in POLICIES]


def module_of(policy: Policy) -> object:
    return sys.modules[f"django_emq.engine.policies.{policy.name}"]


def calls_of(policy: Policy) -> type[Routed]:
    calls: type[Routed] = vars(module_of(policy))["Calls"]
    return calls


def slug(heading: str) -> str:
    """The anchor mkdocs gives a heading."""
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", heading.lower()).strip())


def test_every_module_of_the_package_is_a_registered_policy() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - NOT_POLICIES
    assert modules == set(BY_NAME), "a policy module not registered, or registered twice"
    assert len(POLICIES) == len(BY_NAME) == len(PolicyCalls.__bases__)


@pytest.mark.parametrize("policy", POLICIES, ids=ids)
def test_a_policy_is_its_module_and_its_calls(policy: Policy) -> None:
    module = module_of(policy)
    assert vars(module)["POLICY"] is policy
    calls = calls_of(policy)
    assert calls in PolicyCalls.__bases__
    assert issubclass(calls, Routed)
    assert calls.__doc__
    assert module.__doc__
    assert policy.doc.partition("#")[0] in module.__doc__


@pytest.mark.parametrize("policy", POLICIES, ids=ids)
def test_each_key_of_a_policy_is_typed_where_the_doctor_reads_it(policy: Policy) -> None:
    for attr, kind in policy.keys.items():
        assert kind in TYPES
        assert isinstance(getattr(KEYS, attr), str), f"QueueKeys has no {attr}"
        assert FIXED_KEY_TYPES[attr] == kind
        assert expected_type(KEYS, getattr(KEYS, attr)) == kind
    for suffix, kind in policy.lane_keys.items():
        assert kind in TYPES
        assert expected_type(KEYS, f"{KEYS.prefix}g:{LANE}:{suffix}") == kind
    for family in policy.families:
        assert expected_type(KEYS, f"{KEYS.prefix}{family.start}{LANE}{family.end}") == family.kind
        assert expected_type(KEYS, f"{KEYS.prefix}{family.start}no!{family.end}") is None
    # the keys the policy index stands for, the keys naming lanes: its own keys
    assert set(policy.probe) <= set(policy.keys)
    assert {policy.keys[attr] for attr in policy.per_lane} <= {"hash"}
    assert set(policy.names_lanes) <= set(policy.keys)


def test_each_key_has_one_owner() -> None:
    owned = [attr for policy in POLICIES for attr in policy.keys]
    assert len(owned) == len(set(owned)), "two policies declare one key"
    assert not set(owned) & set(CORE_KEY_TYPES), "a policy's key is declared by the core too"
    assert set(FIXED_KEY_TYPES) == set(CORE_KEY_TYPES) | set(owned)


@pytest.mark.parametrize("policy", POLICIES, ids=ids)
def test_a_policy_has_its_docs_page_and_its_lua(policy: Policy) -> None:
    page, _, anchor = policy.doc.partition("#")
    text = (DOCS / page).read_text()
    assert page in (ROOT / "mkdocs.yml").read_text(), f"{page} is not in the docs' nav"
    if anchor:
        headings = {slug(h) for h in re.findall(r"^#+\s+(.+)$", text, re.MULTILINE)}
        assert anchor in headings, f"{page} has no heading #{anchor}"
    assert policy.lua, "a policy names its Lua"
    for name in policy.lua:
        assert (LUA / name).is_file(), f"lua/{name}"


@pytest.mark.parametrize("policy", POLICIES, ids=ids)
def test_a_policy_s_settings_are_read_and_documented(policy: Policy) -> None:
    page = (DOCS / policy.doc.partition("#")[0]).read_text()
    settings = (DOCS / "settings.md").read_text()
    for key in policy.settings:
        assert key in BY_KEY, f"{key} is no row of conf_table.SETTINGS"
        assert f"`{key}`" in settings or f'"{key}"' in settings, f"settings.md: {key}"
        assert key in page, f"{policy.doc} does not name {key}"
    queue_keywords = inspect.signature(Queue.__init__).parameters
    for option in policy.options:
        assert option.key in policy.settings
        assert option.option in queue_keywords, f"Queue takes no {option.option}"


@pytest.mark.parametrize("policy", POLICIES, ids=ids)
def test_a_policy_s_calls_are_both_queues_calls(policy: Policy) -> None:
    """Written once: neither queue class overrides a policy's call, and a
    policy's calls add no private state or helpers to the queues."""
    calls = calls_of(policy)
    private = [name for name in vars(calls) if name.startswith("_") and not name.startswith("__")]
    assert not private, f"{policy.name}.Calls puts private names on the queues: {private}"
    for name, function in vars(calls).items():
        if name.startswith("_") or not callable(function):
            continue
        assert function.__doc__, f"{policy.name}.{name} has no docstring"
        for queue in (Queue, ShardedQueue):
            assert getattr(queue, name) is function, f"{queue.__name__}.{name} is not the policy's"


def test_the_lua_probe_list_is_generated_from_the_registry() -> None:
    text = probe.CHECK_LUA.read_text()
    assert probe.written(text) == text, "run: python -m django_emq.engine.policies.probe"
    assert probe.probe_hashes() == [
        (getattr(KEYS, attr).removeprefix(KEYS.prefix), letter, attr in p.per_lane)
        for p in POLICIES
        for attr, letter in p.probe.items()
    ]


def test_each_probe_hash_has_a_letter_of_its_own_in_the_policy_index() -> None:
    """The index (``QueueKeys.policies``) spells each probe hash with one letter;
    its ``*`` field is no lane, so a letter is never ``*``."""
    letters = [letter for p in POLICIES for letter in p.probe.values()]
    assert all(len(letter) == 1 and letter.isalpha() for letter in letters)
    assert len(letters) == len(set(letters)), "two probe hashes share a letter"
    for policy in POLICIES:
        assert set(policy.per_lane) <= set(policy.probe), f"{policy.name}: per_lane not probed"


def test_the_probe_line_refuses_a_file_without_one() -> None:
    with pytest.raises(ValueError, match="POLICY_HASHES"):
        probe.written("-- no list here\n")

"""Branded ids: base62, lane ids, validation, and the job id minter."""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_emq.engine import ids
from django_emq.engine.ids import (
    ALPHABET,
    LANE_WIDTH,
    WIDE_LANE_WIDTH,
    JobIdMinter,
    base62,
    lane_id,
    mint_job_id,
    unbase62,
    validate_job_id,
    validate_lane,
    validate_queue_name,
)

MAX_64 = 2**64 - 1


@given(st.integers(min_value=0, max_value=62**WIDE_LANE_WIDTH - 1))
def test_base62_round_trips(n: int) -> None:
    assert unbase62(base62(n, WIDE_LANE_WIDTH)) == n


def test_base62_pads_to_its_width() -> None:
    assert base62(0, 4) == "0000"
    assert base62(61, 3) == "00z"
    assert base62(62, 3) == "010"


def test_base62_alphabet_is_in_ascii_order() -> None:
    assert list(ALPHABET) == sorted(ALPHABET)
    assert len(set(ALPHABET)) == 62


def test_base62_refuses_negative_numbers() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        base62(-1, 11)


def test_base62_refuses_a_number_wider_than_its_width() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        base62(62**3, 3)


@pytest.mark.parametrize("bad", ["-1", "a b", "é", "1.0", "_"])
def test_unbase62_refuses_text_outside_the_alphabet(bad: str) -> None:
    with pytest.raises(ValueError, match="not base62"):
        unbase62(bad)


def test_lane_id_is_the_brand_plus_the_fixed_width_number() -> None:
    assert lane_id("USR", 42) == "USR" + "0" * 10 + "g"
    assert {len(lane_id("USR", n)) for n in (0, 1, 61, 62, 10**9, MAX_64)} == {3 + LANE_WIDTH}


def test_lane_id_of_a_128_bit_number_is_wide() -> None:
    wide = lane_id("ORG", 2**128 - 1)
    assert len(wide) == 3 + WIDE_LANE_WIDTH
    assert validate_lane(wide) == wide
    assert unbase62(wide[3:]) == 2**128 - 1


def test_lane_ids_sort_like_their_numbers() -> None:
    rng = random.Random(1234)
    numbers = [0, 1, 9, 10, 35, 36, 61, 62, 63, 3843, 3844, MAX_64 - 1, MAX_64]
    numbers += [rng.randrange(0, MAX_64) for _ in range(2000)]
    numbers += [rng.randrange(0, 10**6) for _ in range(2000)]
    lanes = [lane_id("USR", n) for n in numbers]
    assert sorted(lanes) == [lane_id("USR", n) for n in sorted(numbers)]


def test_lane_id_round_trips_its_number() -> None:
    for n in (0, 42, 10**12, MAX_64):
        assert unbase62(lane_id("USR", n)[3:]) == n


@pytest.mark.parametrize("brand", ["", "us", "usr", "USRX", "U1R", "ÜSR", None, 123])
def test_lane_id_refuses_a_bad_brand(brand: Any) -> None:
    with pytest.raises(ValueError, match="brand"):
        lane_id(brand, 1)


@pytest.mark.parametrize("pk", [-1, True, 1.0, "1", None, 62**WIDE_LANE_WIDTH])
def test_lane_id_refuses_a_bad_number(pk: Any) -> None:
    with pytest.raises(ValueError, match=r"lane number|too large"):
        lane_id("USR", pk)


def test_validate_lane_accepts_every_lane_id() -> None:
    for n in (0, 42, MAX_64):
        assert validate_lane(lane_id("USR", n)) == lane_id("USR", n)


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "",
        "usr0000000001a",
        "USR}x",
        "USR:1",
        "USR{q}00000000",
        "USR0000000001",
        "USR000000000001",
        "USR00000000001\n",
        " USR00000000001",
        "USR0000000000é",
        "USR" + "0" * 10_000,
        "JOB" + "0" * 12,
        42,
        b"USR00000000001",
        ["USR00000000001"],
    ],
    ids=repr,
)
def test_validate_lane_refuses_what_is_not_a_lane_id(bad: Any) -> None:
    with pytest.raises(ValueError, match="not a lane id"):
        validate_lane(bad)


@pytest.mark.parametrize("name", ["q", "default", "emails.v2", "A-b_c.9", "x" * 64])
def test_validate_queue_name_accepts_safe_names(name: str) -> None:
    assert validate_queue_name(name) == name


@pytest.mark.parametrize(
    "bad",
    ["", "-q", ".q", "_q", "q}", "{q}", "q:1", "q q", "q*", "x" * 65, "é", None, 1, b"q"],
    ids=repr,
)
def test_validate_queue_name_refuses_unsafe_names(bad: Any) -> None:
    with pytest.raises(ValueError, match="not a queue name"):
        validate_queue_name(bad)


def test_minted_job_ids_strictly_increase() -> None:
    minted = [mint_job_id() for _ in range(10_000)]
    assert all(a < b for a, b in itertools.pairwise(minted))


def test_minted_job_ids_are_valid_branded_ids_of_fixed_width() -> None:
    minted = {mint_job_id() for _ in range(100)}
    assert all(validate_job_id(i) == i and i.startswith("JOB") for i in minted)
    assert {len(i) for i in minted} == {3 + 8 + 3 + 6}


def test_minted_job_ids_are_unique_across_threads() -> None:
    per_thread = 2_000
    results: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(len(results))

    def mint(out: list[str]) -> None:
        start.wait()
        out.extend(mint_job_id() for _ in range(per_thread))

    threads = [threading.Thread(target=mint, args=(out,)) for out in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [i for out in results for i in out]
    assert len(everything) == len(set(everything)) == per_thread * len(results)
    for out in results:
        assert out == sorted(out)


def test_minter_keeps_increasing_when_the_clock_steps_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = iter([5_000, 5_000, 4_000, 4_500, 5_001])

    class FakeTime:
        @staticmethod
        def time_ns() -> int:
            return next(clock) * 1_000_000

    monkeypatch.setattr(ids, "time", FakeTime)
    minter = JobIdMinter()
    minted = [minter() for _ in range(5)]
    assert all(a < b for a, b in itertools.pairwise(minted))
    assert [unbase62(i[3:11]) for i in minted] == [5_000] * 4 + [5_001]


def test_minter_borrows_the_next_millisecond_when_its_sequence_runs_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class FrozenTime:
        @staticmethod
        def time_ns() -> int:
            return 7_000 * 1_000_000

    monkeypatch.setattr(ids, "time", FrozenTime)
    minter = JobIdMinter()
    minted = [minter() for _ in range(62**3 + 2)]
    assert all(a < b for a, b in itertools.pairwise(minted))
    assert unbase62(minted[-1][3:11]) == 7_001


def test_wide_lane_ids_have_one_width_whatever_the_value() -> None:
    small, large = lane_id("TEA", 5, wide=True), lane_id("TEA", 2**127, wide=True)
    assert len(small) == len(large) == 3 + 22
    assert small < large

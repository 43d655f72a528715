"""Kafka uuids as logbroker makes and prints them (common/directory_id.py)."""

from __future__ import annotations

import uuid

import pytest

from logbroker.common import directory_id


def test_random_uuids_are_never_reserved_nor_read_as_an_option() -> None:
    """About one random uuid in 64 prints with a leading "-" (a CLI's `--topic-id -Xa...`
    then fails as a missing argument); like Kafka's Uuid.randomUuid, none is ever made."""
    made = [directory_id.random_uuid() for _ in range(20_000)]
    assert all(u.int >= 100 for u in made)
    assert not [u for u in made if directory_id.text(u).startswith("-")]
    assert len(set(made)) == len(made)
    # the filter is not vacuous: uuid4 alone gives dash-led ids at about 1 in 64
    dashed = sum(directory_id.text(uuid.uuid4()).startswith("-") for _ in range(20_000))
    assert dashed > 100


def test_text_and_parse_round_trip_and_bad_text_names_the_value() -> None:
    u = directory_id.random_uuid()
    assert len(directory_id.text(u)) == 22
    assert directory_id.parse(directory_id.text(u)) == u
    assert directory_id.parse(directory_id.ZERO).int == 0
    with pytest.raises(ValueError, match="'not-an-id'"):
        directory_id.parse("not-an-id")

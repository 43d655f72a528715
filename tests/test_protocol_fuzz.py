"""Fuzzing the decoders: hostile bytes must only ever raise ProtocolError.

* random bytes and mutated valid request frames go through `decode_request` (what the
  broker calls on every frame);
* random bytes go through every response class's `decode` at every version (what our
  own client will call);
* every file in tests/corpus/protocol/ is replayed. Inputs that once broke a decoder
  are kept there (raw frame bytes after the 4-byte size prefix). When a fuzz test here
  finds a new one it writes it to that directory as `found-<sha1>.bin` before failing,
  so it can be committed as a regression case.

Set LOGBROKER_FUZZ_EXAMPLES (default 300) to fuzz longer.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_protocol_roundtrip import _populated

from logbroker.protocol import REQUESTS, RESPONSES, ProtocolError, decode_request, encode_request

CORPUS = Path(__file__).resolve().parent / "corpus" / "protocol"
EXAMPLES = int(os.environ.get("LOGBROKER_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(data: bytes, decode=decode_request) -> None:
    try:
        decode(data)
    except ProtocolError as e:
        str(e)  # the message itself must render
    except Exception:
        CORPUS.mkdir(parents=True, exist_ok=True)
        name = f"found-{hashlib.sha1(data).hexdigest()[:16]}.bin"
        (CORPUS / name).write_bytes(data)
        raise


def _seed_frames() -> list[bytes]:
    seeds = []
    for key, cls in sorted(REQUESTS.items()):
        lo, hi = cls.valid_versions
        versions = {lo, hi}
        if cls.flexible_versions_min is not None:
            versions.add(max(lo, cls.flexible_versions_min))
        for v in sorted(versions):
            for obj in (cls(), _populated(cls, v)):
                seeds.append(b"".join(encode_request(key, v, 7, "fuzz", obj))[4:])
    return seeds


SEEDS = _seed_frames()


def test_seeds_decode():
    for s in SEEDS:
        decode_request(s)


@FUZZ
@given(st.binary(max_size=96))
def test_random_bytes(data):
    _check(data)


@FUZZ
@given(st.binary(max_size=64))
def test_random_body_after_valid_header(data):
    for prefix in (
        b"\x00\x00\x00\x09\x00\x00\x00\x01\x00\x00\x00",  # Produce v9, header v2
        b"\x00\x01\x00\x04\x00\x00\x00\x01\xff\xff",  # Fetch v4, header v1
        b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\x00",
    ):  # Metadata v12
        _check(prefix + data)


MUTATION = st.tuples(
    st.sampled_from(["set", "insert", "delete", "truncate", "ff", "varint"]),
    st.integers(0, 10_000),
    st.binary(min_size=1, max_size=6),
)


def _mutate(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for op, at, blob in mutations:
        i = at % (len(buf) + 1)
        if op == "set" and buf:
            i %= len(buf)
            buf[i] = blob[0]
        elif op == "insert":
            buf[i:i] = blob
        elif op == "delete":
            del buf[i : i + len(blob)]
        elif op == "truncate":
            del buf[i:]
        elif op == "ff":  # plant a -1 / huge length
            buf[i : i + 4] = b"\xff\xff\xff" + blob[:1]
        elif op == "varint":  # plant a long unsigned varint
            buf[i:i] = b"\xff" * len(blob) + b"\x7f"
    return bytes(buf)


@FUZZ
@given(st.sampled_from(SEEDS), st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_frames(seed, mutations):
    _check(_mutate(seed, mutations))


@pytest.mark.parametrize("cls", sorted(RESPONSES.values(), key=lambda c: c.api_key), ids=lambda c: c.name)
@settings(
    max_examples=max(20, EXAMPLES // 10),
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_response_decoders(cls, data):
    version = data.draw(st.integers(*cls.valid_versions))
    raw = data.draw(
        st.one_of(
            st.binary(max_size=64),
            st.builds(
                lambda b, m: _mutate(b, m),
                st.just(_populated(cls, version).to_bytes(version)),
                st.lists(MUTATION, min_size=1, max_size=3),
            ),
        )
    )
    try:
        cls.decode(raw, 0, version)
    except ProtocolError:
        pass


CORPUS_FILES = sorted(CORPUS.glob("*.bin")) if CORPUS.is_dir() else []


def test_corpus_present():
    assert len(CORPUS_FILES) >= 10


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_corpus_replay(path):
    _check(path.read_bytes())

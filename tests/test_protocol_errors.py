"""Kafka's error table (protocol/specs/errors/errors.json) and what is generated from it.

The table is Kafka 4.1.1's Errors.java as data (tools/vendor_kafka_errors.py);
tools/gen_errors.py writes the Python `ErrorCode` (protocol/error_codes.py) and the Rust
consts (rust/src/protocol/error_codes.rs) from it. Checked here: the generated files are up
to date, the table is complete and consistent, Python, Rust and the client's exception
classes agree with it, and the vendoring tool reads Kafka's Java the way the table says.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from logbroker.client import errors as client_errors
from logbroker.protocol import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "python" / "logbroker" / "protocol" / "specs" / "errors" / "errors.json"
PY_OUT = ROOT / "python" / "logbroker" / "protocol" / "error_codes.py"
RS_OUT = ROOT / "rust" / "src" / "protocol" / "error_codes.rs"


def _load_tool(name: str):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "tools"))


@pytest.fixture(scope="module")
def gen():
    return _load_tool("gen_errors")


@pytest.fixture(scope="module")
def table(gen):
    version, errors = gen.load_table(TABLE)
    assert version == "4.1.1"
    return errors


def test_generated_files_match_generator(gen, tmp_path):
    gen.generate(TABLE, tmp_path / "error_codes.py", tmp_path / "error_codes.rs")
    assert (tmp_path / "error_codes.py").read_text(encoding="utf-8") == PY_OUT.read_text(encoding="utf-8"), (
        "python/logbroker/protocol/error_codes.py out of date: run tools/gen_errors.py"
    )
    assert (tmp_path / "error_codes.rs").read_text(encoding="utf-8") == RS_OUT.read_text(encoding="utf-8"), (
        "rust/src/protocol/error_codes.rs out of date: run tools/gen_errors.py"
    )


def test_table_names_its_source():
    text = TABLE.read_text(encoding="utf-8")
    assert "Licensed to the Apache Software Foundation" in text
    assert '"kafkaVersion": "4.1.1"' in text
    assert "org/apache/kafka/common/protocol/Errors.java" in text


def test_table_has_every_code_once(table):
    codes = [e["code"] for e in table]
    assert codes == list(range(-1, 137))  # Errors.java's order: -1, then 0..136 (134-136: Kafka 4.4.0's)
    names = [e["name"] for e in table]
    assert len(set(names)) == len(names)
    assert all(e["message"] for e in table if e["name"] != "NONE")
    assert [e["name"] for e in table if e["exception"] is None] == ["NONE"]


def test_known_retriable_flags(table):
    retriable = {e["name"]: e["retriable"] for e in table}
    for name in (
        "NOT_LEADER_OR_FOLLOWER",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "REQUEST_TIMED_OUT",
        "NETWORK_EXCEPTION",
        "NOT_COORDINATOR",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "NOT_ENOUGH_REPLICAS",
        "KAFKA_STORAGE_ERROR",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_TOPIC_ID",
        "CORRUPT_MESSAGE",
        "REPLICA_NOT_AVAILABLE",
        "NOT_CONTROLLER",
        "SHARE_SESSION_LIMIT_REACHED",
    ):
        assert retriable[name], name
    for name in (
        "NONE",
        "UNKNOWN_SERVER_ERROR",
        "TOPIC_AUTHORIZATION_FAILED",
        "OFFSET_OUT_OF_RANGE",
        "MESSAGE_TOO_LARGE",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "INVALID_PRODUCER_EPOCH",
        "PRODUCER_FENCED",
        "SASL_AUTHENTICATION_FAILED",
        "NEW_LEADER_ELECTED",
        "OFFSET_MOVED_TO_TIERED_STORAGE",
        "REBOOTSTRAP_REQUIRED",
    ):
        assert not retriable[name], name
    assert sum(retriable.values()) == 32


def test_python_enum_matches_table(table):
    assert [(c.name, int(c)) for c in ErrorCode] == [(e["name"], e["code"]) for e in table]
    for e in table:
        code = ErrorCode[e["name"]]
        assert (code.retriable, code.message, code.exception_name) == (e["retriable"], e["message"], e["exception"])
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and not ErrorCode.TOPIC_AUTHORIZATION_FAILED.retriable
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message == "This server does not host this topic-partition."


def test_rust_consts_match_table(table):
    text = RS_OUT.read_text(encoding="utf-8")
    consts = re.findall(r"^pub const (\w+): i16 = (-?\d+);$", text, flags=re.MULTILINE)
    assert [(name, int(code)) for name, code in consts] == [(e["name"], e["code"]) for e in table]
    body = text[text.index("pub fn retriable") :]
    retriable = re.findall(r"^\s+(?:\| )?([A-Z][A-Z0-9_]+)$", body, flags=re.MULTILINE)
    assert retriable == [e["name"] for e in table if e["retriable"]]
    names = dict(re.findall(r'^\s+([A-Z][A-Z0-9_]+) => "([A-Z0-9_]+)",$', text, flags=re.MULTILINE))
    assert names == {e["name"]: e["name"] for e in table}


def test_no_hand_written_code_consts_left_in_rust():
    """The data path takes its codes from the generated module, not from a table of its own."""
    for path in (ROOT / "rust" / "src").rglob("*.rs"):
        if path == RS_OUT or "messages" in path.parts or path.name == "messages.rs":
            continue
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"const (NOT_LEADER_OR_FOLLOWER|UNKNOWN_TOPIC_OR_PARTITION|CORRUPT_MESSAGE): i16", text), (
            path
        )


def test_client_errors_agree_with_table(table):
    for e in table:
        if e["name"] == "NONE":
            continue
        cls = client_errors.error_class(e["code"])
        assert cls.code == e["code"] and cls.code.name == e["name"]
        assert (cls.retriable, cls.default_message) == (e["retriable"], e["message"]), cls.__name__
    assert client_errors.NotLeaderOrFollowerError.retriable
    assert not client_errors.error_class(ErrorCode.TOPIC_AUTHORIZATION_FAILED).retriable
    assert client_errors.KafkaConnectionError.retriable == ErrorCode.NETWORK_EXCEPTION.retriable
    assert client_errors.KafkaTimeoutError.retriable == ErrorCode.REQUEST_TIMED_OUT.retriable


def test_error_for_uses_the_default_message():
    e = client_errors.error_for(3, None, "describe topic 't'")
    assert (
        str(e) == "describe topic 't': UNKNOWN_TOPIC_OR_PARTITION (3): This server does not host this topic-partition."
    )
    assert str(client_errors.error_for(3, "gone")) == "UNKNOWN_TOPIC_OR_PARTITION (3): gone"
    assert str(client_errors.error_for(9999)) == "UNKNOWN_ERROR_CODE (9999)"


ERRORS_JAVA = """\
package org.apache.kafka.common.protocol;

import org.apache.kafka.common.errors.NotLeaderOrFollowerException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.InvalidRecordException;

/** The errors (a comment with NONE(1, "x") in it). */
public enum Errors {
    UNKNOWN_SERVER_ERROR(-1, "The server experienced an \\"unexpected\\" error.",
            UnknownServerException::new),
    NONE(0, null, message -> null),
    NOT_LEADER_OR_FOLLOWER(6, "Not the leader. " +
            "Or not a replica, see http://kafka.apache.org/.", // trailing comment
            NotLeaderOrFollowerException::new),
    TOPIC_AUTHORIZATION_FAILED(29, "Topic authorization failed.", TopicAuthorizationException::new),
    INVALID_RECORD(87, "This record has failed the validation on broker and hence will be rejected.",
            message -> new InvalidRecordException(message));

    private final short code;
}
"""

CLASSES = {
    "common/errors/ApiException.java": "public class ApiException extends KafkaException {}",
    "common/errors/RetriableException.java": "public abstract class RetriableException extends ApiException {}",
    "common/errors/InvalidMetadataException.java": "public abstract class InvalidMetadataException extends RetriableException {}",
    "common/errors/NotLeaderOrFollowerException.java": "public class NotLeaderOrFollowerException extends InvalidMetadataException {}",
    "common/errors/AuthorizationException.java": "public class AuthorizationException extends ApiException {}",
    "common/errors/TopicAuthorizationException.java": "public class TopicAuthorizationException extends AuthorizationException {}",
    "common/errors/UnknownServerException.java": "public class UnknownServerException extends ApiException {}",
    "common/InvalidRecordException.java": "import org.apache.kafka.common.errors.ApiException;\npublic class InvalidRecordException extends ApiException {}",
}


def test_vendoring_tool_reads_errors_java(tmp_path):
    vendor = _load_tool("vendor_kafka_errors")
    base = tmp_path / "org" / "apache" / "kafka"
    (base / "common" / "protocol").mkdir(parents=True)
    (base / "common" / "errors").mkdir(parents=True)
    (base / "common" / "protocol" / "Errors.java").write_text(ERRORS_JAVA)
    for path, text in CLASSES.items():
        pkg = "org.apache.kafka." + path.rsplit("/", 1)[0].replace("/", ".")
        (base / path).write_text(f"package {pkg};\n{text}\n")
    entries = vendor.read_entries(tmp_path)
    assert entries == [
        {
            "code": -1,
            "name": "UNKNOWN_SERVER_ERROR",
            "exception": "UnknownServerException",
            "retriable": False,
            "message": 'The server experienced an "unexpected" error.',
        },
        {"code": 0, "name": "NONE", "exception": None, "retriable": False, "message": None},
        {
            "code": 6,
            "name": "NOT_LEADER_OR_FOLLOWER",
            "exception": "NotLeaderOrFollowerException",
            "retriable": True,
            "message": "Not the leader. Or not a replica, see http://kafka.apache.org/.",
        },
        {
            "code": 29,
            "name": "TOPIC_AUTHORIZATION_FAILED",
            "exception": "TopicAuthorizationException",
            "retriable": False,
            "message": "Topic authorization failed.",
        },
        {
            "code": 87,
            "name": "INVALID_RECORD",
            "exception": "InvalidRecordException",
            "retriable": False,
            "message": "This record has failed the validation on broker and hence will be rejected.",
        },
    ]
    out = tmp_path / "errors.json"
    out.write_text(vendor.render(entries, "9.9.9", "test"))
    gen = _load_tool("gen_errors")
    assert gen.load_table(out) == ("9.9.9", entries)

"""The table of broker configuration keys (python/logbroker/common/config_keys.toml) and what
reads it: Python's BROKER_KEYS/TOPIC_KEYS/GROUP_KEYS (common/config.py), the Rust log engine's
LogConfig through the generated rust/src/config_keys.rs (tools/gen_config_keys.py),
`logbroker config-keys` and docs/configuration.md.

Checked here: the generated file is current, the table checks itself when loaded, both
languages have the same defaults and refuse the same out-of-bounds values (Python's
validate_topic_config and BrokerConfig, Rust's Log.open and update_config), and every key
is documented.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from logbroker import _core
from logbroker.common import config
from logbroker.common.config import (
    BROKER_KEYS,
    GROUP_KEYS,
    LOG_ENGINE_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    load_config_keys,
    validate_topic_config,
)

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "python" / "logbroker" / "common" / "config_keys.toml"
RS_OUT = ROOT / "rust" / "src" / "config_keys.rs"
DOCS = ROOT / "docs" / "configuration.md"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_config_keys", ROOT / "tools" / "gen_config_keys.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_config_keys"] = mod
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules["gen_config_keys"]
    return mod


def test_generated_rust_is_current(tmp_path):
    _gen().generate(TABLE, tmp_path / "config_keys.rs")
    assert (tmp_path / "config_keys.rs").read_text(encoding="utf-8") == RS_OUT.read_text(encoding="utf-8"), (
        "rust/src/config_keys.rs out of date: run tools/gen_config_keys.py"
    )


def test_table_is_what_python_serves():
    keys = load_config_keys(TABLE)
    assert [k.name for k in keys] == list(BROKER_KEYS)
    assert {k.topic_key: k.name for k in keys if k.topic_key} == {t: b for t, (_p, b) in TOPIC_KEYS.items()}
    assert {k.group_key: k.name for k in keys if k.group_key} == {g: b for g, (_p, b) in GROUP_KEYS.items()}
    assert set(config.DYNAMIC_BROKER_KEYS) == {k.name for k in keys if k.topic_key or k.dynamic}
    assert LOG_ENGINE_KEYS == tuple(k.topic_key for k in keys if k.engine)
    assert {k.name for k in keys if k.sensitive} == {
        "ssl.keystore.key",
        "ssl.key.password",
        "archive.s3.secret.access.key",
        "iceberg.s3.secret.access.key",
        "iceberg.catalog.credential",
        "iceberg.catalog.token",
        "delegation.token.secret.key",
    }
    # the Rust side reads the same engine keys, with the same bounds
    engine, others = _gen().load_engine_keys(TABLE)
    assert [row["topic"] for row in engine] == list(LOG_ENGINE_KEYS)
    assert others == sorted(set(TOPIC_KEYS) - set(LOG_ENGINE_KEYS))
    for row in engine:
        key = BROKER_KEYS[row["name"]]
        assert (row.get("min"), row.get("max")) == (key.min, key.max), row["name"]


def _write(tmp_path: Path, row: str) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text("[[key]]\n" + row)
    return path


@pytest.mark.parametrize(
    "row, error",
    [
        (
            'name = "a"\ntype = "int"\ndefault = 5\nmin = 6\ndoc = "d"\n',
            "default '5' does not parse: value 5 is outside",
        ),
        ('name = "a"\ntype = "int"\ndefault = 5\nmax = 2147483648\ndoc = "d"\n', "not within a int's"),
        ('name = "a"\ntype = "long"\ndefault = "5"\ndoc = "d"\n', "default '5' is not a long"),
        ('name = "a"\ntype = "bool"\ndefault = 1\ndoc = "d"\n', "is not a bool"),
        ('name = "a"\ntype = "integer"\ndefault = 1\ndoc = "d"\n', "type 'integer' is not one of"),
        ('name = "a"\ntype = "string"\ndefault = ""\ndoc = "d"\nsynonym = "b"\n', "unknown fields ['synonym']"),
        ('name = "a"\ntype = "string"\ndefault = ""\nparser = "nope"\ndoc = "d"\n', "no parser 'nope'"),
        ('name = "a"\ntype = "choice"\ndefault = "x"\ndoc = "d"\n', "values are for (and needed by) choice and list"),
        ('name = "a"\ntype = "choice"\ndefault = "x"\nvalues = ["y"]\ndoc = "d"\n', "expected one of y, got 'x'"),
        ('name = "a"\ntype = "string"\ndefault = ""\nmin = 1\ndoc = "d"\n', "min and max are for int, long and double"),
        ('name = "a"\ntype = "string"\ndefault = ""\nengine = true\ndoc = "d"\n', "engine keys are topic-level keys"),
        ('name = "a"\ntype = "string"\ndefault = ""\n', "no doc"),
        (
            'name = "a"\ntype = "string"\ndefault = ""\ndoc = "d"\n[[key]]\nname = "a"\ntype = "bool"\ndefault = true\n'
            'doc = "d"\n',
            "name a appears more than once",
        ),
    ],
)
def test_table_rows_are_checked(tmp_path, row, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        load_config_keys(_write(tmp_path, row))


# --------------------------------------------------------------- both languages agree


def _open(tmp_path: Path, cfg: dict[str, str], name: str = "t") -> _core.Log:
    return _core.Log.open(str(tmp_path / f"{name}-0"), name, 0, cfg)


def test_engine_defaults_are_the_tables(tmp_path):
    table_defaults = {k.topic_key: k.default for k in BROKER_KEYS.values() if k.engine}
    assert BrokerConfig().engine_config({}) == table_defaults
    # an engine given nothing has the table's defaults, key for key, as does one given them all
    assert _open(tmp_path, {}, "a").config == table_defaults
    assert _open(tmp_path, BrokerConfig().engine_config({}), "b").config == table_defaults


def _out_of_bounds(key) -> list[str]:
    below = [] if key.min in (-(2**63), float("-inf")) else [str(key.min - (1 if key.type != "double" else 0.01))]
    above = [str(key.max + (1 if key.type != "double" else 0.01))]
    return below + above


ENGINE_NUMERIC = [k for k in BROKER_KEYS.values() if k.engine and k.type in ("int", "long", "double")]


@pytest.mark.parametrize("key", ENGINE_NUMERIC, ids=lambda k: k.topic_key)
def test_both_languages_take_the_same_bounds(tmp_path, key):
    topic_key = key.topic_key
    for ok in (str(key.min), str(key.max)):
        assert validate_topic_config({topic_key: ok}) == {topic_key: str(key.parse(ok))}
        log = _open(tmp_path, {topic_key: ok}, "ok")
        assert float(log.config[topic_key]) == float(ok)
        log.close()
    log = _open(tmp_path, {}, "live")
    for bad in _out_of_bounds(key):
        with pytest.raises(ConfigError, match=re.escape(f"{topic_key!r} = {bad!r}")):
            validate_topic_config({topic_key: bad})
        with pytest.raises(ConfigError, match=re.escape(f"{key.name!r} = {bad!r}")):
            BrokerConfig({key.name: bad})
        with pytest.raises(_core.InvalidConfigError, match=re.escape(topic_key)) as e:
            _open(tmp_path, {topic_key: bad}, "bad")
        assert bad in str(e.value)
        before = log.config
        with pytest.raises(_core.InvalidConfigError, match=re.escape(topic_key)):
            log.update_config({topic_key: bad})
        assert log.config == before
    log.close()


@pytest.mark.parametrize(
    "topic_key, bad",
    [
        ("cleanup.policy", "compacted"),
        ("cleanup.policy", "delete,delete"),
        ("cleanup.policy", ""),
        ("message.timestamp.type", "Now"),
        ("retention.archive", "maybe"),
        ("segment.bytes", "big"),
    ],
)
def test_both_languages_refuse_the_same_values(tmp_path, topic_key, bad):
    with pytest.raises(ConfigError, match=re.escape(topic_key)):
        validate_topic_config({topic_key: bad})
    with pytest.raises(_core.InvalidConfigError, match=re.escape(topic_key)):
        _open(tmp_path, {topic_key: bad})


def test_update_config_through_the_broker_config(tmp_path):
    """What the replica manager does: a topic override, checked by Python, applied by Rust."""
    cfg = BrokerConfig({"log.segment.bytes": "4096", "log.cleanup.policy": "delete,compact"})
    log = _open(tmp_path, cfg.engine_config({}))
    assert (log.config["segment.bytes"], log.config["cleanup.policy"]) == ("4096", "compact,delete")
    overrides = validate_topic_config({"segment.bytes": " 1000 ", "min.cleanable.dirty.ratio": "0.25"})
    log.update_config(cfg.engine_config(overrides))
    assert (log.config["segment.bytes"], log.config["min.cleanable.dirty.ratio"]) == ("1000", "0.25")
    log.close()


# --------------------------------------------------------------- documentation


def _doc_table(section: str) -> list[str]:
    """The first column's names of the table under `## section` in docs/configuration.md."""
    text = DOCS.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)`", body, re.M)


def test_docs_list_every_key():
    broker = _doc_table("Broker keys")
    missing = [k for k in BROKER_KEYS if k not in broker]
    assert not missing, f"docs/configuration.md, Broker keys, has no row for {missing}"
    unknown = [k for k in broker if k not in BROKER_KEYS and "<" not in k]
    assert not unknown, f"docs/configuration.md, Broker keys, has rows for keys that do not exist: {unknown}"
    assert sorted(_doc_table("Topic keys")) == sorted(TOPIC_KEYS)
    assert sorted(_doc_table("Group keys")) == sorted(GROUP_KEYS)
    topic_rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|$", DOCS.read_text(encoding="utf-8"), re.M)
    synonyms = {t: b for t, b in topic_rows}
    for table in (TOPIC_KEYS, GROUP_KEYS):
        for key, (_parse, broker_key) in table.items():
            assert synonyms.get(key) == broker_key, key


def test_docs_give_the_tables_defaults():
    rows = re.findall(r"^\| `([^`]+)` \|([^|]*)\|", DOCS.read_text(encoding="utf-8").split("## Topic keys")[0], re.M)
    assert {name for name, _ in rows if "<" not in name} == {k for k in _doc_table("Broker keys") if "<" not in k}
    for name, default in rows:
        if name not in BROKER_KEYS:
            continue
        shown = default.strip().strip("`")
        want = BROKER_KEYS[name].default
        assert (
            shown == want
            or shown.startswith(f"{want}` ")
            or shown.startswith(f"{want} ")
            or (want == "" and shown in ("", "(empty)"))
        ), f"{name}: docs say {default.strip()!r}, the table {want!r}"


def test_config_keys_command_prints_the_table(capsys):
    from logbroker.cli.main import main

    assert main(["config-keys"]) == 0
    out = capsys.readouterr().out
    printed = re.findall(r"^(\S+) = ", out, re.M)
    assert printed == list(BROKER_KEYS)

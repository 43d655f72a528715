"""raise_open_files_limit: the soft RLIMIT_NOFILE goes up to the hard limit, once."""

from __future__ import annotations

import logging
import resource

import pytest

from logbroker.broker import fd_limit
from logbroker.broker.fd_limit import raise_open_files_limit


@pytest.fixture
def restore_limit():
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield saved
    resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def test_raises_soft_to_hard_and_logs(restore_limit, caplog):
    _soft, hard = restore_limit
    ceiling = fd_limit._ceiling(hard)
    if ceiling <= 512:
        pytest.skip(f"hard limit {hard} leaves no room to lower the soft one")
    lowered = 512
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    with caplog.at_level(logging.INFO, logger="logbroker.fd_limit"):
        assert raise_open_files_limit() == (lowered, ceiling)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (ceiling, hard)
    assert any("from 512 to" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)
    caplog.clear()
    # Already at the hard limit: nothing to do, nothing logged.
    with caplog.at_level(logging.INFO, logger="logbroker.fd_limit"):
        assert raise_open_files_limit() == (ceiling, ceiling)
    assert not caplog.records


def test_refusal_is_a_warning_not_an_error(restore_limit, monkeypatch, caplog):
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (256, 4096))

    def refuse(_which, _limits):
        raise ValueError("not allowed")

    monkeypatch.setattr(resource, "setrlimit", refuse)
    with caplog.at_level(logging.INFO, logger="logbroker.fd_limit"):
        assert raise_open_files_limit() == (256, 256)
    assert any(r.levelno == logging.WARNING and "256 to 4096" in r.getMessage() for r in caplog.records)


def test_unlimited_hard_limit_is_capped(monkeypatch):
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (1024, resource.RLIM_INFINITY))
    calls = []
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: calls.append(limits))
    old, new = raise_open_files_limit()
    assert old == 1024 and new == fd_limit._ceiling(resource.RLIM_INFINITY) > 1024
    assert calls == [(new, resource.RLIM_INFINITY)]

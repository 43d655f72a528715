"""console/sessions.py on its own, with a clock the test moves: idle expiry
(`console.session.timeout.ms`), the 12-hour cap, the least recently used session pushed out
past MAX_SESSIONS, mechanism choice, and the CSRF and Origin checks."""

from __future__ import annotations

import pytest

from logbroker.console import sessions as s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(
    clock: Clock,
    right: dict[tuple[str, str], list[str]] | None = None,
    enabled: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
) -> s.Sessions:
    right = right or {}
    return s.Sessions(lambda u, p: right.get((u, p), []), enabled.split(","), idle_s=60.0, clock=clock)


def cookie(session: s.Session) -> str:
    return f"other=1; {s.COOKIE}={session.id}; x=y"


def test_idle_expiry_and_the_cap():
    clock = Clock()
    sessions = store(clock)
    a, _ = sessions.create("alice", "PLAIN", "pw")
    clock.now += 59
    assert sessions.session_of(cookie(a)) is a  # used: the idle time starts again
    clock.now += 59
    assert sessions.session_of(cookie(a)) is a
    clock.now += 61
    with pytest.raises(s.SessionError, match="expired") as e:
        sessions.session_of(cookie(a))
    assert e.value.status == 401
    with pytest.raises(s.SessionError, match="unknown, expired or logged out"):
        sessions.session_of(cookie(a))  # forgotten for good
    b, _ = sessions.create("bob", "PLAIN", "pw")
    ended = None
    while ended is None and clock.now - b.created < 2 * s.MAX_AGE_S:  # busy all along: still ends at MAX_AGE_S
        clock.now += 50
        try:
            sessions.session_of(cookie(b))
        except s.SessionError:
            ended = clock.now - b.created
    assert ended is not None and s.MAX_AGE_S < ended <= s.MAX_AGE_S + 50 and len(sessions) == 0


def test_no_cookie_a_made_up_one_and_logout():
    clock = Clock()
    sessions = store(clock)
    for header in (None, "", "other=1", f"{s.COOKIE}=", f"{s.COOKIE}={'A' * 43}"):
        with pytest.raises(s.SessionError) as e:
            sessions.session_of(header)
        assert e.value.status == 401
    a, _ = sessions.create("alice", "PLAIN", "pw")
    sessions.forget(a)
    with pytest.raises(s.SessionError):
        sessions.session_of(cookie(a))


def test_the_least_recently_used_is_pushed_out():
    clock = Clock()
    sessions = store(clock)
    made = [sessions.create(f"u{i}", "PLAIN", "pw")[0] for i in range(s.MAX_SESSIONS)]
    sessions.session_of(cookie(made[0]))  # now the most recently used
    extra, evicted = sessions.create("late", "PLAIN", "pw")
    assert evicted == [made[1]] and len(sessions) == s.MAX_SESSIONS
    assert sessions.session_of(cookie(made[0])) is made[0]
    with pytest.raises(s.SessionError):
        sessions.session_of(cookie(made[1]))
    clock.now += 61
    assert len(sessions.expired()) == s.MAX_SESSIONS and len(sessions) == 0


def test_mechanism_is_the_strongest_the_listener_enables():
    right = {("alice", "pw"): ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], ("bob", "pw"): ["SCRAM-SHA-256"]}
    assert store(Clock(), right).check_password("alice", "pw") == "SCRAM-SHA-512"
    assert store(Clock(), right, "PLAIN,SCRAM-SHA-256").check_password("alice", "pw") == "SCRAM-SHA-256"
    assert store(Clock(), right, "PLAIN").check_password("bob", "pw") is None  # no credential for PLAIN
    assert store(Clock(), right).check_password("alice", "") is None
    assert store(Clock(), right).check_password("carol", "pw") is None


def test_csrf_and_origin():
    sessions = store(Clock())
    a, _ = sessions.create("alice", "PLAIN", "pw")
    own = {"http://console:8080"}
    s.Sessions.check_change(a, "GET", {}, own)  # reads need no token
    s.Sessions.check_change(a, "POST", {"x-csrf-token": a.csrf_token}, own)
    s.Sessions.check_change(a, "DELETE", {"x-csrf-token": a.csrf_token, "origin": "http://console:8080"}, own)
    for headers in (
        {},
        {"x-csrf-token": ""},
        {"x-csrf-token": a.csrf_token[:-1]},
        {"x-csrf-token": a.csrf_token, "origin": "http://evil.example"},
        {"x-csrf-token": a.csrf_token, "origin": "https://console:8080"},
    ):
        with pytest.raises(s.SessionError) as e:
            s.Sessions.check_change(a, "POST", headers, own)
        assert e.value.status == 403


def test_cookie_flags():
    assert s.set_cookie("abc", secure=False) == f"{s.COOKIE}=abc; Path=/; HttpOnly; SameSite=Strict"
    assert s.set_cookie("abc", secure=True).endswith("; Secure")
    assert "Max-Age=0" in s.clear_cookie(True) and s.clear_cookie(True).endswith("; Secure")
    assert s.cookie_value(f"a=1; {s.COOKIE}=xyz", s.COOKIE) == "xyz" and s.cookie_value("a=1", s.COOKIE) is None


def test_a_token_session_ends_with_its_token():
    clock = Clock()
    sessions = store(clock)
    t, _ = sessions.create("alice", "OAUTHBEARER", "jwt", lifetime_s=30)
    clock.now += 29
    assert sessions.session_of(cookie(t)) is t
    clock.now += 1
    with pytest.raises(s.SessionError, match="expired"):
        sessions.session_of(cookie(t))

"""Console logins: who is logged in, and the checks on each request, when the broker has a
SASL listener (SASL_PLAINTEXT, SASL_SSL), so that no one reaches its data without a login.

A login is a user of the broker and its password (broker/http_basic_auth.py: the SCRAM
credentials of the metadata image, the PLAIN users of the listeners' JAAS configs), or, when
the broker takes OAUTHBEARER, an OAuth access token its validator accepts (the principal is
the token's subject; the session ends when the token expires). It makes a session: a random id (32 bytes, URL-safe base64) sent as the cookie

    logbroker_console=<id>; Path=/; HttpOnly; SameSite=Strict[; Secure on https]

and a CSRF token of its own (the same size), which the page reads from the login answer or
`GET /api/session` and sends back as the `X-CSRF-Token` header of every request that changes
something (any method but GET and HEAD). The session keeps the user's password, in this
process's memory only, because every Kafka request the console makes for the user is made
as that user: its clients log in to the SASL listener with the user's SASL mechanism
(SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN: the first of those the listener enables that the
password is right for), or the token through OAUTHBEARER), so the broker's ACLs decide what the user sees and may do.

Invariants:
- a session is forgotten on logout, after `console.session.timeout.ms` without a request,
  and `MAX_AGE_S` after its login however busy; a forgotten id is never valid again (ids are
  random, never reused);
- at most `MAX_SESSIONS` at once: a login beyond that forgets the least recently used;
- a request that changes something also carries an `Origin` header, if any, naming the
  console itself (a page elsewhere cannot submit a form to it);
- ids and tokens are compared in constant time.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

COOKIE = "logbroker_console"
CSRF_HEADER = "x-csrf-token"
MAX_AGE_S = 12 * 3600
MAX_SESSIONS = 1000
MECHANISM_PREFERENCE = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
SAFE_METHODS = ("GET", "HEAD")


class SessionError(Exception):
    """A request the session checks refuse: `status` 401 (no valid session) or 403 (CSRF)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(eq=False)
class Session:
    id: str
    user: str
    mechanism: str
    password: str
    csrf_token: str
    created: float
    last_used: float
    clients: dict[str, Any] = dataclasses.field(default_factory=dict)  # the console's clients for this user
    ends: float | None = None  # a token login: when its token expires (clock time)

    def over(self, now: float, idle_s: float) -> bool:
        """Past its idle time, MAX_AGE_S, or its token's expiry."""
        return (
            now - self.last_used > idle_s
            or now - self.created > MAX_AGE_S
            or (self.ends is not None and now >= self.ends)
        )

    @property
    def principal(self) -> str:
        return f"User:{self.user}"

    @property
    def login(self) -> tuple[str, str, str]:
        """(mechanism, user, password), as `own_clients.client_config` takes it."""
        return self.mechanism, self.user, self.password


class Sessions:
    def __init__(
        self,
        mechanisms: Callable[[str, str], list[str]],
        enabled: list[str],
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`mechanisms(user, password)`: the SASL mechanisms the password is right for
        (BasicAuth.mechanisms); `enabled`: the broker's sasl.enabled.mechanisms."""
        self._mechanisms = mechanisms
        self.enabled = [m for m in MECHANISM_PREFERENCE if m in enabled]
        self.idle_s = idle_s
        self.clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._by_id)

    def check_password(self, user: str, password: str) -> str | None:
        """The mechanism the console's clients will log in with, or None (an unknown user, a
        wrong password, or a user whose credential is for no enabled mechanism). Blocks for
        the SCRAM iterations: run it in a thread."""
        if not user or not password:
            return None
        right = self._mechanisms(user, password)
        return next((m for m in self.enabled if m in right), None)

    def create(
        self, user: str, mechanism: str, password: str, lifetime_s: float | None = None
    ) -> tuple[Session, list[Session]]:
        """A new session, and the sessions it pushed out (over MAX_SESSIONS), to close;
        `lifetime_s`: a token login's, which ends the session with the token."""
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), user, mechanism, password, secrets.token_urlsafe(32), now, now)
        if lifetime_s is not None:
            session.ends = now + min(lifetime_s, MAX_AGE_S)
        self._by_id[session.id] = session
        evicted = []
        while len(self._by_id) > MAX_SESSIONS:
            evicted.append(self._by_id.popitem(last=False)[1])
        return session, evicted

    def session_of(self, cookie_header: str | None) -> Session:
        """The request's live session (its use now recorded), or SessionError 401."""
        sid = cookie_value(cookie_header or "", COOKIE)
        if not sid:
            raise SessionError(401, "not logged in: log in to the console first")
        session = self._by_id.get(sid)
        if session is None or not hmac.compare_digest(session.id, sid):
            raise SessionError(401, "not logged in: the session is unknown, expired or logged out; log in again")
        now = self.clock()
        if session.over(now, self.idle_s):
            del self._by_id[sid]
            raise SessionError(401, "the session expired; log in again")
        session.last_used = now
        self._by_id.move_to_end(sid)
        return session

    @staticmethod
    def check_change(session: Session, method: str, headers: dict[str, str], own_origins: set[str]) -> None:
        """SessionError 403 unless a request that changes something (any method but GET and
        HEAD) carries the session's CSRF token and, if it has an Origin, comes from the console."""
        if method in SAFE_METHODS:
            return
        origin = headers.get("origin")
        if origin is not None and origin not in own_origins:
            raise SessionError(403, f"refused: a {method} from another origin ({origin[:100]})")
        token = headers.get(CSRF_HEADER, "")
        if not token or not hmac.compare_digest(token.encode(), session.csrf_token.encode()):
            raise SessionError(403, f"refused: a {method} needs the session's CSRF token in the X-CSRF-Token header")

    def forget(self, session: Session) -> None:
        self._by_id.pop(session.id, None)

    def expired_all(self) -> list[Session]:
        """Forgets and returns every session (the console stops)."""
        gone = list(self._by_id.values())
        self._by_id.clear()
        return gone

    def expired(self) -> list[Session]:
        """Forgets and returns the sessions past their time, to close."""
        now = self.clock()
        gone = [s for s in self._by_id.values() if s.over(now, self.idle_s)]
        for s in gone:
            del self._by_id[s.id]
        return gone


def cookie_value(header: str, name: str) -> str | None:
    """The value of cookie `name` in a Cookie header, or None."""
    for part in header.split(";"):
        k, sep, v = part.strip().partition("=")
        if sep and k == name:
            return v
    return None


def set_cookie(session_id: str, secure: bool) -> str:
    return f"{COOKIE}={session_id}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def clear_cookie(secure: bool) -> str:
    return f"{COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")

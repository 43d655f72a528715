"""GSS-API (RFC 2743, C bindings RFC 2744) with the Kerberos V5 mechanism, through MIT Kerberos's
libgssapi_krb5 (loaded with ctypes when first used; Debian's libgssapi-krb5-2, present
wherever krb5 is). What SASL GSSAPI (common/sasl_gssapi.py, client/sasl.py) needs, on both sides:

    acceptor (the broker)                      initiator (a client, or a node)
    Credential.acceptor(principal, keytab)     Credential.initiator(principal, keytab | None)
    ctx = Acceptor(cred)                       ctx = Initiator(cred, "kafka@broker-host")
    out = ctx.step(token)  <── AP-REQ ───────  out = ctx.step(b"")
    ...                    ─── AP-REP ──>      ctx.step(reply)      (mutual authentication)
    ctx.complete, ctx.peer  "alice@REALM"      ctx.complete
    wrap / unwrap (integrity only, no confidentiality: SASL's layer negotiation)

Credentials come from a keytab named per credential (MIT's gss_acquire_cred_from cred store:
`keytab` for an acceptor, `client_keytab` plus a private MEMORY ccache for an initiator, which
then asks the KDC for its tickets itself), or, for an initiator without a keytab, from the
default credential cache (KRB5CCNAME; `kinit` fills it). The realm's KDCs come from krb5.conf
(KRB5_CONFIG).

Every call may read a keytab, write the replay cache or talk to the KDC: callers on an event
loop run them on a thread (ctypes releases the GIL for the call). A context is used by one
thread at a time. Failures raise `GssError` with GSS-API's major and the mechanism's minor
messages, e.g. "gss_accept_sec_context: Unspecified GSS failure. Minor code may provide more
information: Request ticket server kafka/localhost@REALM kvno 2 not found in keytab".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from dataclasses import dataclass

__all__ = ["Acceptor", "Credential", "GssError", "Initiator", "default_realm"]

GSS_S_COMPLETE = 0
GSS_S_CONTINUE_NEEDED = 1
_ERROR_MASK = 0xFFFF0000  # routine and calling errors; the low bits are supplementary info
GSS_C_GSS_CODE, GSS_C_MECH_CODE = 1, 2
GSS_C_BOTH, GSS_C_INITIATE, GSS_C_ACCEPT = 0, 1, 2
GSS_C_INDEFINITE = 0xFFFFFFFF
GSS_C_MUTUAL_FLAG, GSS_C_SEQUENCE_FLAG, GSS_C_CONF_FLAG, GSS_C_INTEG_FLAG = 2, 8, 16, 32

OM_uint32 = ctypes.c_uint32


class _Buffer(ctypes.Structure):
    _fields_ = [("length", ctypes.c_size_t), ("value", ctypes.c_void_p)]


class _KeyValue(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class _KeyValueSet(ctypes.Structure):
    _fields_ = [("count", OM_uint32), ("elements", ctypes.POINTER(_KeyValue))]


class GssError(Exception):
    """A GSS-API call failed: `.call`, `.major`, `.minor` and the library's messages."""

    def __init__(self, call: str, major: int, minor: int, message: str) -> None:
        super().__init__(f"{call}: {message}")
        self.call, self.major, self.minor = call, major, minor


@dataclass
class _Lib:
    gss: ctypes.CDLL
    nt_hostbased_service: ctypes.c_void_p
    nt_krb5_principal: ctypes.c_void_p
    mech_krb5: ctypes.c_void_p


_lib: _Lib | None = None
_lib_lock = threading.Lock()


def _load() -> _Lib:
    global _lib
    with _lib_lock:
        if _lib is None:
            name = ctypes.util.find_library("gssapi_krb5") or "libgssapi_krb5.so.2"
            try:
                gss = ctypes.CDLL(name)
            except OSError as e:
                raise GssError(
                    "load",
                    0,
                    0,
                    f"MIT Kerberos's GSS-API library ({name}) is not installed: {e} "
                    "(Debian: libgssapi-krb5-2; GSSAPI needs it)",
                ) from None
            for fn in (
                "gss_import_name",
                "gss_display_name",
                "gss_release_name",
                "gss_acquire_cred_from",
                "gss_acquire_cred",
                "gss_release_cred",
                "gss_accept_sec_context",
                "gss_init_sec_context",
                "gss_delete_sec_context",
                "gss_wrap",
                "gss_unwrap",
                "gss_release_buffer",
                "gss_display_status",
            ):
                getattr(gss, fn).restype = OM_uint32
            _lib = _Lib(
                gss,
                ctypes.c_void_p.in_dll(gss, "GSS_C_NT_HOSTBASED_SERVICE"),
                ctypes.c_void_p.in_dll(gss, "GSS_KRB5_NT_PRINCIPAL_NAME"),
                ctypes.c_void_p.in_dll(gss, "gss_mech_krb5"),
            )
        return _lib


def _status_text(lib: _Lib, code: int, kind: int) -> list[str]:
    out: list[str] = []
    context = OM_uint32(0)
    while True:
        minor = OM_uint32()
        text = _Buffer()
        lib.gss.gss_display_status(
            ctypes.byref(minor), OM_uint32(code), kind, None, ctypes.byref(context), ctypes.byref(text)
        )
        if text.length:
            out.append(ctypes.string_at(text.value, text.length).decode("utf-8", "replace"))
        lib.gss.gss_release_buffer(ctypes.byref(minor), ctypes.byref(text))
        if context.value == 0:
            return out


def _check(lib: _Lib, call: str, major: int, minor: OM_uint32) -> int:
    if major & _ERROR_MASK:
        texts = _status_text(lib, major & _ERROR_MASK, GSS_C_GSS_CODE)
        if minor.value:
            texts += _status_text(lib, minor.value, GSS_C_MECH_CODE)
        raise GssError(call, major, minor.value, ": ".join(t for t in texts if t) or f"major {major:#x}")
    return major


def _take(lib: _Lib, buf: _Buffer) -> bytes:
    data = ctypes.string_at(buf.value, buf.length) if buf.length else b""
    minor = OM_uint32()
    lib.gss.gss_release_buffer(ctypes.byref(minor), ctypes.byref(buf))
    return data


def _import_name(lib: _Lib, text: str, name_type: ctypes.c_void_p) -> ctypes.c_void_p:
    raw = text.encode()
    buf = _Buffer(len(raw), ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p))
    minor, name = OM_uint32(), ctypes.c_void_p()
    major = lib.gss.gss_import_name(ctypes.byref(minor), ctypes.byref(buf), name_type, ctypes.byref(name))
    _check(lib, f"gss_import_name({text!r})", major, minor)
    return name


def _display_name(lib: _Lib, name: ctypes.c_void_p) -> str:
    minor, buf = OM_uint32(), _Buffer()
    major = lib.gss.gss_display_name(ctypes.byref(minor), name, ctypes.byref(buf), None)
    _check(lib, "gss_display_name", major, minor)
    return _take(lib, buf).decode("utf-8", "replace")


def _release_name(lib: _Lib, name: ctypes.c_void_p) -> None:
    if name:
        minor = OM_uint32()
        lib.gss.gss_release_name(ctypes.byref(minor), ctypes.byref(name))


def default_realm() -> str:
    """krb5.conf's default_realm ('' when there is none), as Kafka's principal-to-local
    DEFAULT rule reads it (from libkrb5, which the GSS-API library links)."""
    name = ctypes.util.find_library("krb5") or "libkrb5.so.3"
    try:
        krb5 = ctypes.CDLL(name)
    except OSError:
        return ""
    context, realm = ctypes.c_void_p(), ctypes.c_char_p()
    if krb5.krb5_init_context(ctypes.byref(context)) != 0:
        return ""
    try:
        if krb5.krb5_get_default_realm(context, ctypes.byref(realm)) != 0:
            return ""
        value = (realm.value or b"").decode()
        krb5.krb5_free_default_realm(context, realm)
        return value
    finally:
        krb5.krb5_free_context(context)


class Credential:
    """A principal's credential handle (released when collected)."""

    def __init__(self, handle: ctypes.c_void_p, principal: str, lib: _Lib) -> None:
        self._handle = handle
        self.principal = principal
        self._lib = lib

    @classmethod
    def acceptor(cls, principal: str, keytab: str) -> Credential:
        """`principal`'s (e.g. kafka/broker1.example.com@EXAMPLE.COM) keys from `keytab`, to
        accept contexts addressed to it and to no other principal in the keytab."""
        return cls._acquire(principal, GSS_C_ACCEPT, {"keytab": keytab})

    @classmethod
    def initiator(cls, principal: str | None, keytab: str | None) -> Credential:
        """To start contexts as `principal`: from `keytab` into a private in-memory ccache (the
        library gets and renews the TGT itself), or with no keytab from the default ccache."""
        store: dict[str, str] = {}
        if keytab:
            if not principal:
                raise GssError("gss_acquire_cred_from", 0, 0, "a keytab needs the principal to log in as")
            store = {"client_keytab": keytab, "ccache": f"MEMORY:logbroker-{id(store):x}"}
        return cls._acquire(principal, GSS_C_INITIATE, store)

    @classmethod
    def _acquire(cls, principal: str | None, usage: int, store: dict[str, str]) -> Credential:
        lib = _load()
        name = _import_name(lib, principal, lib.nt_krb5_principal) if principal else ctypes.c_void_p()
        try:
            minor, handle = OM_uint32(), ctypes.c_void_p()
            if store:
                elements = (_KeyValue * len(store))(*(_KeyValue(k.encode(), v.encode()) for k, v in store.items()))
                kv = _KeyValueSet(len(store), elements)
                major = lib.gss.gss_acquire_cred_from(
                    ctypes.byref(minor),
                    name,
                    OM_uint32(GSS_C_INDEFINITE),
                    None,
                    usage,
                    ctypes.byref(kv),
                    ctypes.byref(handle),
                    None,
                    None,
                )
            else:
                major = lib.gss.gss_acquire_cred(
                    ctypes.byref(minor),
                    name,
                    OM_uint32(GSS_C_INDEFINITE),
                    None,
                    usage,
                    ctypes.byref(handle),
                    None,
                    None,
                )
            where = f" from keytab {store.get('keytab') or store.get('client_keytab')}" if store else ""
            _check(lib, f"gss_acquire_cred({principal or 'the default ccache'}{where})", major, minor)
            return cls(handle, principal or "", lib)
        finally:
            _release_name(lib, name)

    @property
    def handle(self) -> ctypes.c_void_p:
        return self._handle

    def __del__(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is not None and self._handle:
            minor = OM_uint32()
            lib.gss.gss_release_cred(ctypes.byref(minor), ctypes.byref(self._handle))


class _Context:
    def __init__(self, lib: _Lib) -> None:
        self._lib = lib
        self._ctx = ctypes.c_void_p()
        self.complete = False

    def wrap(self, data: bytes) -> bytes:
        """`data` with an integrity check (no encryption: SASL's "no security layer" messages)."""
        lib = self._lib
        minor, out = OM_uint32(), _Buffer()
        inp = _Buffer(len(data), ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p))
        major = lib.gss.gss_wrap(ctypes.byref(minor), self._ctx, 0, 0, ctypes.byref(inp), None, ctypes.byref(out))
        _check(lib, "gss_wrap", major, minor)
        return _take(lib, out)

    def unwrap(self, data: bytes) -> bytes:
        lib = self._lib
        minor, out = OM_uint32(), _Buffer()
        inp = _Buffer(len(data), ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p))
        major = lib.gss.gss_unwrap(ctypes.byref(minor), self._ctx, ctypes.byref(inp), ctypes.byref(out), None, None)
        _check(lib, "gss_unwrap", major, minor)
        return _take(lib, out)

    def __del__(self) -> None:
        lib = getattr(self, "_lib", None)
        if lib is not None and self._ctx:
            minor = OM_uint32()
            lib.gss.gss_delete_sec_context(ctypes.byref(minor), ctypes.byref(self._ctx), None)


class Acceptor(_Context):
    """The accepting side of one context (one SASL exchange on one connection)."""

    def __init__(self, credential: Credential) -> None:
        super().__init__(credential._lib)
        self._cred = credential
        self.peer: str | None = None  # the initiator's principal, once complete

    def step(self, token: bytes) -> bytes:
        """The initiator's token -> the token to send back (b"" when none)."""
        lib = self._lib
        minor, out, src = OM_uint32(), _Buffer(), ctypes.c_void_p()
        inp = _Buffer(len(token), ctypes.cast(ctypes.c_char_p(token), ctypes.c_void_p))
        major = lib.gss.gss_accept_sec_context(
            ctypes.byref(minor),
            ctypes.byref(self._ctx),
            self._cred.handle,
            ctypes.byref(inp),
            None,
            ctypes.byref(src),
            None,
            ctypes.byref(out),
            None,
            None,
            None,
        )
        try:
            reply = _take(lib, out)
            _check(lib, "gss_accept_sec_context", major, minor)
            if major & 0xFFFF == GSS_S_COMPLETE and not major & GSS_S_CONTINUE_NEEDED:
                self.complete = True
                self.peer = _display_name(lib, src)
            return reply
        finally:
            _release_name(lib, src)


class Initiator(_Context):
    """The initiating side of one context, to `service@host` (e.g. kafka@broker1.example.com),
    asking for mutual authentication."""

    def __init__(self, credential: Credential, service_at_host: str) -> None:
        super().__init__(credential._lib)
        self._cred = credential
        self.target = service_at_host
        self._name = _import_name(self._lib, service_at_host, self._lib.nt_hostbased_service)

    def step(self, token: bytes) -> bytes:
        """b"" first, then each token the acceptor sent -> the token to send (b"" when none)."""
        lib = self._lib
        minor, out = OM_uint32(), _Buffer()
        inp = _Buffer(len(token), ctypes.cast(ctypes.c_char_p(token), ctypes.c_void_p))
        major = lib.gss.gss_init_sec_context(
            ctypes.byref(minor),
            self._cred.handle,
            ctypes.byref(self._ctx),
            self._name,
            lib.mech_krb5,
            OM_uint32(GSS_C_MUTUAL_FLAG | GSS_C_SEQUENCE_FLAG | GSS_C_INTEG_FLAG),
            OM_uint32(0),
            None,
            ctypes.byref(inp) if token else None,
            None,
            ctypes.byref(out),
            None,
            None,
        )
        reply = _take(lib, out)
        _check(lib, f"gss_init_sec_context(to {self.target})", major, minor)
        if not major & GSS_S_CONTINUE_NEEDED:
            self.complete = True
        return reply

    def __del__(self) -> None:
        _release_name(self._lib, self._name)
        super().__del__()

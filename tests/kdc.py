"""A real MIT Kerberos KDC on loopback for the GSSAPI tests (Debian's krb5-kdc, installed by
scripts/test), in the shape of Kafka's MiniKdc:

    kdc = MiniKdc(tmp_path)          # realm LOGBROKER.TEST, its own database, krb5.conf and port
    kdc.start()
    kdc.add_principal("kafka/localhost", keytab)   # random keys, exported to a keytab
    env = kdc.env()                  # KRB5_CONFIG (and a private ccache) for processes using it
    ...
    kdc.stop()

Everything lives under the directory given: the database (kdb5_util create), kdc.conf
(KRB5_KDC_PROFILE), krb5.conf with the realm's KDC on 127.0.0.1:<port> over TCP (UDP on
the same port number), and the KDC's log. Nothing reads /etc/krb5.conf: every
process gets KRB5_CONFIG, and Java `-Djava.security.krb5.conf`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

REALM = "LOGBROKER.TEST"
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


def _tool(name: str) -> str:
    for d in (None, "/usr/sbin", "/usr/bin"):
        path = shutil.which(name, path=d) if d else shutil.which(name)
        if path:
            return path
    raise RuntimeError(
        f"{name} is not installed: the Kerberos tests need MIT Kerberos's KDC and tools "
        "(Debian: krb5-kdc krb5-admin-server krb5-user libsasl2-modules-gssapi-mit; scripts/test installs them)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MiniKdc:
    def __init__(self, root: Path, realm: str = REALM) -> None:
        self.root = Path(root)
        self.realm = realm
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.krb5_conf = self.root / "krb5.conf"
        self.kdc_conf = self.root / "kdc.conf"
        self.log = self.root / "krb5kdc.log"

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """What a process using this realm needs in its environment."""
        env = {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}
        if ccache is not None:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        return env

    def _run(self, *argv: str, stdin: str | None = None) -> str:
        proc = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, env={**os.environ, **self.env()}, timeout=60
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout}")
        return proc.stdout

    def start(self) -> MiniKdc:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        db = self.root / "principal"
        self.kdc_conf.write_text(
            f"[kdcdefaults]\n kdc_listen = 127.0.0.1:{self.port}\n kdc_tcp_listen = 127.0.0.1:{self.port}\n\n"
            f"[realms]\n {self.realm} = {{\n  database_name = {db}\n"
            f"  key_stash_file = {self.root / 'stash'}\n  acl_file = {self.root / 'kadm5.acl'}\n"
            f"  max_life = 1d\n  max_renewable_life = 7d\n"
            f"  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }}\n\n"
            f"[logging]\n kdc = FILE:{self.log}\n"
        )
        self.krb5_conf.write_text(
            f"[libdefaults]\n default_realm = {self.realm}\n dns_lookup_realm = false\n dns_lookup_kdc = false\n"
            " dns_canonicalize_hostname = false\n rdns = false\n udp_preference_limit = 1\n"
            " ticket_lifetime = 24h\n forwardable = true\n\n"
            f"[realms]\n {self.realm} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n\n"
            f"[domain_realm]\n localhost = {self.realm}\n 127.0.0.1 = {self.realm}\n"
        )
        (self.root / "kadm5.acl").write_text("")
        self._run(_tool("kdb5_util"), "-r", self.realm, "create", "-s", "-P", "masterkey-for-tests")
        with open(self.root / "krb5kdc.stderr", "wb") as stderr:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                [_tool("krb5kdc"), "-n", "-r", self.realm],
                env={**os.environ, **self.env()},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited ({self.proc.returncode}): {self._tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{self.port} in 20 s: {self._tail()}")

    def _tail(self) -> str:
        text = ""
        for f in (self.root / "krb5kdc.stderr", self.log):
            if f.exists():
                text += f.read_text()[-2000:]
        return text

    def add_principal(self, name: str, keytab: Path | None = None, password: str | None = None) -> str:
        """Creates `name@REALM` (random keys, or `password`) and, with `keytab`, adds its keys
        there. Returns the full principal."""
        principal = f"{name}@{self.realm}"
        kadmin = _tool("kadmin.local")
        if password is None:
            self._run(kadmin, "-r", self.realm, "-q", f"addprinc -randkey {principal}")
        else:
            self._run(kadmin, "-r", self.realm, "-q", f"addprinc -pw {password} {principal}")
        if keytab is not None:
            self._run(kadmin, "-r", self.realm, "-q", f"ktadd -norandkey -k {keytab} {principal}")
        return principal

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        self._run(_tool("kinit"), "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> MiniKdc:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

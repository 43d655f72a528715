"""What a SASL login costs, per mechanism: connect, ApiVersions, SaslHandshake and the
mechanism's SaslAuthenticate rounds, to one in-process broker on loopback (PLAIN: one round;
SCRAM-SHA-256 and -512: two, with 4096 PBKDF2 iterations on each side; GSSAPI: three, the
broker decrypting a Kerberos ticket with its keytab, against a real MIT KDC started here as
the tests do, tests/kdc.py). The client is logbroker's BrokerConnection; its GSSAPI credential
(the TGT) is acquired once, and the service ticket is cached after the first login, as in a
long-running client. Also the CPU per login, client and broker together (one process).

Run: python -m benches.bench_sasl_logins [--logins 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from kdc import MiniKdc  # noqa: E402
from test_kerberos import ADMIN, Realm, kerberos_broker  # noqa: E402

from logbroker.client.connection import BrokerConnection  # noqa: E402


def logins(bs: str, config: dict, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = BrokerConnection(bs, config=config)
        times.append((time.perf_counter() - t0) * 1000)
        c.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logins", type=int, default=200)
    args = ap.parse_args()
    assert MiniKdc  # the realm below starts it
    with tempfile.TemporaryDirectory() as d:
        realm = Realm(Path(d) / "realm")
        try:
            with kerberos_broker(
                realm, Path(d) / "data", **{"sasl.enabled.mechanisms": "GSSAPI,PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"}
            ) as b:
                port = b.bootstrap_servers.rsplit(":", 1)[1]
                bs = f"localhost:{port}"
                from logbroker import Admin

                plain = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}
                plain |= {"sasl_username": "admin", "sasl_password": ADMIN}
                admin = Admin(bs, **plain)
                for m in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # one mechanism of a user per request
                    admin.alter_user_scram_credentials([("sam", m, "sam-secret", 4096)])
                admin.close()
                cases = {
                    "PLAIN": plain,
                    "SCRAM-SHA-256": {**plain, "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "sam"}
                    | {"sasl_password": "sam-secret"},
                    "SCRAM-SHA-512": {**plain, "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "sam"}
                    | {"sasl_password": "sam-secret"},
                    "GSSAPI": {
                        "security_protocol": "SASL_PLAINTEXT",
                        "sasl_mechanism": "GSSAPI",
                        "sasl_kerberos_keytab": str(realm.keytabs["alice"]),
                        "sasl_kerberos_principal": realm.principal("alice"),
                    },
                }
                print(f"{'mechanism':<14} {'median ms':>10} {'p90 ms':>8} {'CPU ms/login':>13}")
                for name, config in cases.items():
                    logins(bs, config, 5)  # warm: a first GSSAPI login asks the KDC for the service ticket
                    cpu0 = os.times()
                    times = logins(bs, config, args.logins)
                    cpu1 = os.times()
                    # the broker runs in this process: client and broker together
                    cpu = ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) * 1000 / args.logins
                    times.sort()
                    p90 = times[int(len(times) * 0.9)]
                    print(f"{name:<14} {statistics.median(times):>10.2f} {p90:>8.2f} {cpu:>13.2f}")
        finally:
            realm.kdc.stop()


if __name__ == "__main__":
    main()

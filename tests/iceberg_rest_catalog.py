"""Apache Iceberg's own REST catalog server on loopback, for the tests of
`iceberg.catalog.type=rest`: `RESTCatalogServer` from iceberg-open-api's test fixtures (the
server of the apache/iceberg-rest-fixture image) over a JDBC catalog in a SQLite file and a
local warehouse directory. Its jars (iceberg_rest/pom.xml) come from Maven Central into the
same local repository as Spark's (~/.cache/logbroker-spark/m2); the classpath is kept per
pom, so only the first use resolves it.

    with RestCatalogServer(tmp_path / "rest") as server:
        server.uri        # http://127.0.0.1:PORT, for iceberg.catalog.uri
        server.warehouse  # the directory its tables are placed in
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
import urllib.request
from pathlib import Path

from conftest import free_port, require_java

from benches.peers.common import one_at_a_time

HERE = Path(__file__).resolve().parent
POM = HERE / "iceberg_rest" / "pom.xml"
SETTINGS = HERE.parent / "spark" / "maven" / "settings.xml"
CACHE = Path(os.environ.get("LOGBROKER_SPARK_CACHE", "~/.cache/logbroker-spark")).expanduser()
MAIN = "org.apache.iceberg.rest.RESTCatalogServer"


@one_at_a_time(lambda: CACHE / ".iceberg-rest.lock")
def classpath() -> str:
    """The server's classpath, resolved by Maven once per version of the pom."""
    require_java()
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
    out = CACHE / f"iceberg-rest-{digest}.classpath"
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        res = subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-s",
                str(SETTINGS),
                f"-Dmaven.repo.local={CACHE / 'm2'}",
                "-f",
                str(POM),
                "dependency:build-classpath",
                f"-Dmdep.outputFile={tmp}",
            ],
            capture_output=True,
            text=True,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"mvn could not resolve Iceberg's REST catalog server ({POM}): {res.stdout[-2000:]}{res.stderr[-2000:]}"
            )
        tmp.rename(out)
    return out.read_text().strip()


class RestCatalogServer:
    """The server as a child process; its catalog (SQLite) and warehouse live in `root`,
    so a restart on the same port finds its tables again."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.warehouse = root / "warehouse"
        self.proc: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> RestCatalogServer:
        cp = classpath()
        self.warehouse.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "CATALOG_WAREHOUSE": self.warehouse.as_uri(),
            "CATALOG_URI": f"jdbc:sqlite:{self.root / 'catalog.db'}",
            "CATALOG_REST_PORT": str(self.port),
        }
        self.log_path = self.root / "rest-catalog.log"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            ["java", "-cp", cp, MAIN], env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"Iceberg's REST catalog server did not answer on {self.uri}; log:\n{self.log_path.read_text()[-3000:]}"
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def __enter__(self) -> RestCatalogServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class RecordingProxy:
    """An HTTP proxy on loopback in front of the REST catalog server: each request is passed
    on unchanged and recorded (method, path, Authorization header, body, and the answer's
    body), so a test sees what the broker sent the catalog."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.requests: list[dict] = []

    def start(self) -> RecordingProxy:
        import http.server
        import threading
        import urllib.error

        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "accept-encoding")
                }  # answers unzipped
                req = urllib.request.Request(
                    proxy.upstream + self.path, data=body or None, method=self.command, headers=headers
                )
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, answer, answer_headers = r.status, r.read(), r.headers
                except urllib.error.HTTPError as e:
                    status, answer, answer_headers = e.code, e.read(), e.headers
                proxy.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": body.decode(errors="replace"),
                        "answer": answer.decode(errors="replace"),
                    }
                )
                self.send_response(status)
                for k, v in answer_headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-encoding"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

"""The comparison itself: a plan of steps (one per measured run), executed in order under a
progress bar, each workload run against logbroker and Kafka alternately (A B A B ...).

Phases: machine limits; cold start and idle RSS (fresh broker per run); then both brokers
stay up and each throughput/latency run goes to one of them while the other idles:
produce (Java ProducerPerformance, then confluent-kafka), consume (1 GiB topics,
confluent-kafka; ConsumerPerformance where it works), end-to-end latency; last, a py-spy
profile of logbroker under produce and consume load.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benches.compare import limits, loadgen, ours
from benches.peers.common import create_topic, delete_topic, min_isr_size
from benches.peers.kafka import KafkaPeer, install
from benches.peers.logbroker import LogbrokerPeer

BROKERS = ("logbroker", "kafka")  # A, B: every pair runs logbroker first, then Kafka
SIZES = (100, 1024)
ACKS = ("1", "all")
PARTS = (1, 8)


@dataclass
class Profile:
    name: str
    pairs: int
    java_records: dict[int, int]
    ck_records: dict[int, int]
    consume_bytes: int
    consume_size: int = 1024
    e2e_rate: float = 5000.0
    e2e_seconds: float = 10.0
    e2e_size: int = 1024
    e2e_skip: int = 1000
    e2e_linger: float = 1.0
    # a second, informational point: one produce request per record (linger.ms=0)
    e2e_req_rate: float = 2000.0
    idle_wait: float = 5.0
    limits_bytes: int = 1 << 30
    limits_repeats: int = 3
    profile: bool = True
    segment_bytes: int = 268_435_456
    warmup_records: int = 100_000  # untimed, 1 KiB, per broker (JIT, first segments)


FULL = Profile(
    "full",
    pairs=3,
    java_records={100: 2_500_000, 1024: 400_000},
    ck_records={100: 1_500_000, 1024: 400_000},
    consume_bytes=1 << 30,
)
QUICK = Profile(
    "quick",
    pairs=1,
    java_records={100: 300_000, 1024: 50_000},
    ck_records={100: 100_000, 1024: 30_000},
    consume_bytes=128 << 20,
    e2e_seconds=3.0,
    e2e_skip=500,
    idle_wait=2.0,
    limits_bytes=256 << 20,
    limits_repeats=1,
)


@dataclass
class Sample:
    metric: str  # e.g. "produce", "consume", "e2e", "coldstart", "idle_rss"
    client: str
    config: str
    broker: str
    pair: int
    value: float | None
    unit: str
    extra: dict = field(default_factory=dict)
    error: str = ""


class RssSampler(threading.Thread):
    """Peak VmRSS of the broker under test while a run is going on (10 Hz): one process, or
    the sum over a cluster's processes (`rss` is the peer's own reading)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.rss = None
        self.peak = 0
        self.done = threading.Event()

    def watch(self, rss) -> None:
        self.peak = rss()
        self.rss = rss

    def release(self) -> int:
        rss, self.rss = self.rss, None
        if rss is not None:
            try:
                self.peak = max(self.peak, rss())
            except OSError:
                pass
        return self.peak

    def run(self) -> None:
        while not self.done.wait(0.1):
            rss = self.rss
            if rss is not None:
                try:
                    self.peak = max(self.peak, rss())
                except OSError:
                    pass


@dataclass
class Step:
    label: str
    fn: object
    weight: float = 1.0


class Comparison:
    def __init__(self, profile: Profile, out_dir: Path, data_root: Path | None, log=print):
        self.p = profile
        self.out_dir = out_dir
        self.data_root = data_root
        self.log = log
        self.samples: list[Sample] = []
        self.meta: dict = {"profile": asdict(profile)}
        self.peers: dict[str, object] = {}
        self.sampler = RssSampler()
        self.inst = None
        self.topic_seq = 0
        self.consume_topics: dict[tuple[str, int], tuple[str, int]] = {}
        self.profiles: dict[str, Path] = {}
        # topics' replication factor and the latency runs' acks (the three-node comparison,
        # benches/compare/cluster.py, sets 3 and "all")
        self.replication_factor = 1
        self.e2e_acks = "1"

    # -- helpers ---------------------------------------------------------------------------
    def _new_peer(self, broker: str):
        if broker == "kafka":
            return KafkaPeer(self.data_root, self.p.segment_bytes, install_info=self.inst)
        return LogbrokerPeer(self.data_root, self.p.segment_bytes)

    def _topic(self, stem: str) -> str:
        self.topic_seq += 1
        return f"{stem}-{self.topic_seq}"

    def _config(self, text: str) -> str:
        """A workload's config column; with replicated topics it says so."""
        rf = self.replication_factor
        return text if rf == 1 else f"{text}, replication factor {rf}"

    def _create(self, peer, topic: str, partitions: int) -> None:
        create_topic(peer.bootstrap, topic, partitions, replication_factor=self.replication_factor)

    def _measured(self, peer, fn, topic: str | None = None) -> dict:
        """Run fn (which runs load-generator subprocesses to completion) and add the broker's CPU
        and peak RSS, the load generators' CPU (RUSAGE_CHILDREN) and the wall time; for a
        cluster also each node's CPU, and, for a replicated `topic`, the smallest ISR of its
        partitions right after the run (a follower that fell behind shows here)."""
        by_node = getattr(peer, "cpu_by_node", None)
        n0 = by_node() if by_node else None
        c0 = peer.cpu()
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        self.sampler.watch(peer.rss)
        try:
            d = fn()
        finally:
            peak = self.sampler.release()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        d["wall_s"] = time.monotonic() - t0
        d["broker_cpu_s"] = peer.cpu() - c0
        d["client_cpu_s"] = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        d["broker_peak_rss"] = peak
        if by_node is not None and n0 is not None:
            d["broker_cpu_s_by_node"] = [b - a for a, b in zip(n0, by_node())]
        if topic is not None and self.replication_factor > 1:
            d["isr_min"] = min_isr_size(peer.bootstrap, topic)
        return d

    def _record(self, metric, client, config, broker, pair, fn, unit="MB/s", value_of=None) -> None:
        try:
            d = fn()
            value = value_of(d) if value_of else d["bytes"] / d["seconds"] / 1e6
            self.samples.append(Sample(metric, client, config, broker, pair, value, unit, d))
        except Exception as e:  # noqa: BLE001 - a failed run is a result, shown in the table
            msg = f"{type(e).__name__}: {e}"
            self.log(f"{metric} {client} {config} on {broker} pair {pair}: {msg}")
            self.samples.append(Sample(metric, client, config, broker, pair, None, unit, {}, msg[:400]))

    # -- plan ------------------------------------------------------------------------------
    def plan(self) -> list[Step]:
        p = self.p
        steps: list[Step] = [Step("install Kafka (Maven Central, cached)", self.step_install, 1)]
        steps.append(Step("machine limits", self.step_limits, 3))
        for i in range(p.pairs):
            for b in BROKERS:
                steps.append(Step(f"cold start + idle RSS: {b} #{i + 1}", lambda b=b, i=i: self.step_cold(b, i), 2))
        steps.append(Step("start both brokers", self.step_start_both, 2))
        steps.append(Step("warm-up", self.step_warmup, 2))
        for client in ("java", "ck", "ours"):
            for size in SIZES:
                for acks in ACKS:
                    for parts in PARTS:
                        for i in range(p.pairs):
                            for b in BROKERS:
                                steps.append(
                                    Step(
                                        f"produce {client} {size}B acks={acks} p={parts}: {b} #{i + 1}",
                                        lambda c=client, s=size, a=acks, n=parts, b=b, i=i: self.step_produce(
                                            c, s, a, n, b, i
                                        ),
                                        0.1 if client == "ours" and not ours.AVAILABLE else 1,
                                    )
                                )
        for parts in PARTS:
            for b in BROKERS:
                steps.append(
                    Step(
                        f"fill {p.consume_bytes >> 20} MiB topic p={parts}: {b}",
                        lambda n=parts, b=b: self.step_fill(b, n),
                        3,
                    )
                )
        for client in ("ck", "java", "ours"):
            for parts in PARTS:
                for i in range(p.pairs):
                    for b in BROKERS:
                        steps.append(
                            Step(
                                f"consume {client} p={parts}: {b} #{i + 1}",
                                lambda c=client, n=parts, b=b, i=i: self.step_consume(c, n, b, i),
                                0.1 if client == "ours" and not ours.AVAILABLE else 1,
                            )
                        )
        steps.append(Step("latency warm-up", self.step_e2e_warmup, 1))
        for variant in ("main", "requests"):
            for i in range(p.pairs):
                for b in BROKERS:
                    steps.append(
                        Step(
                            f"end-to-end latency ({variant}): {b} #{i + 1}",
                            lambda v=variant, b=b, i=i: self.step_e2e(v, b, i),
                            max(1.0, p.e2e_seconds / 3),
                        )
                    )
        if p.profile:
            steps.append(Step("py-spy profile of logbroker: produce", lambda: self.step_profile("produce"), 2))
            steps.append(
                Step(
                    "py-spy profile of logbroker: produce acks=all (confluent-kafka)",
                    lambda: self.step_profile("produce-acks-all"),
                    2,
                )
            )
            steps.append(Step("py-spy profile of logbroker: consume", lambda: self.step_profile("consume"), 2))
        steps.append(Step("stop brokers", self.step_stop_both, 1))
        return steps

    # -- steps -----------------------------------------------------------------------------
    def step_install(self) -> None:
        self.inst = install()
        self.meta["kafka_version"] = self.inst.version
        self.meta["kafka_skipped"] = self.inst.skipped
        self.meta["kafka_settings"] = KafkaPeer(segment_bytes=self.p.segment_bytes).settings()
        self.meta["logbroker_settings"] = LogbrokerPeer(segment_bytes=self.p.segment_bytes).settings()

    def step_limits(self) -> None:
        d = (self.data_root or Path("/tmp")) / f"limits-{os.getpid()}"
        try:
            self.meta["limits"] = limits.measure(d, self.p.limits_bytes, self.p.limits_repeats)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def step_cold(self, broker: str, pair: int) -> None:
        peer = self._new_peer(broker)
        peer.prepare()  # temp dir, config, and for Kafka the storage format (timed apart)
        try:
            cold = peer.start()
            extra = {"listening_s": peer.t_listening - peer.t_spawn, "format_s": getattr(peer, "t_format", 0.0)}
            self.samples.append(
                Sample("coldstart", "confluent-kafka", "spawn -> first acked produce", broker, pair, cold, "s", extra)
            )
            time.sleep(self.p.idle_wait)
            self.samples.append(
                Sample(
                    "idle_rss",
                    "-",
                    f"{self.p.idle_wait:g} s after ready, 1 topic",
                    broker,
                    pair,
                    peer.rss() / 1e6,
                    "MB",
                    {"cpu_s": peer.cpu()},
                )
            )
        except Exception as e:  # noqa: BLE001
            self.samples.append(
                Sample(
                    "coldstart",
                    "confluent-kafka",
                    "spawn -> first acked produce",
                    broker,
                    pair,
                    None,
                    "s",
                    {},
                    f"{type(e).__name__}: {e}"[:400],
                )
            )
            self.log(peer.log_tail())
        finally:
            peer.stop()

    def step_start_both(self) -> None:
        for b in BROKERS:
            peer = self._new_peer(b)
            peer.start()
            self.peers[b] = peer
            self.meta[f"{b}_pid"] = peer.pid

    def step_warmup(self) -> None:
        """Untimed: JIT-warm Kafka, let both create their first segments, and let Kafka create
        __consumer_offsets on the first FindCoordinator (librdkafka sends one for its group.id)."""
        for peer in self.peers.values():
            t = self._topic("warm")
            create_topic(peer.bootstrap, t, 1)
            loadgen.java_produce(self.inst, peer.bootstrap, t, 1024, self.p.warmup_records, "1")
            loadgen.ck_consume(peer.bootstrap, t, 1, self.p.warmup_records)
            delete_topic(peer.bootstrap, t)

    def step_produce(self, client: str, size: int, acks: str, parts: int, broker: str, pair: int) -> None:
        config = self._config(f"{size} B, acks={acks}, {parts} partition{'s' if parts > 1 else ''}")
        cname = {"java": "kafka-producer-perf-test", "ck": "confluent-kafka", "ours": "logbroker client"}[client]
        if client == "ours" and not ours.AVAILABLE:
            self.samples.append(Sample("produce", cname, config, broker, pair, None, "MB/s", {}, ours.REASON))
            return
        peer = self.peers[broker]
        topic = self._topic(f"p{size}-{acks}-{parts}")
        self._create(peer, topic, parts)

        def run() -> dict:
            if client == "java":
                return loadgen.java_produce(self.inst, peer.bootstrap, topic, size, self.p.java_records[size], acks)
            if client == "ck":
                return loadgen.ck_produce(peer.bootstrap, topic, size, self.p.ck_records[size], acks)
            return loadgen.ours_produce(peer.bootstrap, topic, size, self.p.ck_records[size], acks)

        self._record("produce", cname, config, broker, pair, lambda: self._measured(peer, run, topic))
        delete_topic(peer.bootstrap, topic)

    def step_fill(self, broker: str, parts: int) -> None:
        peer = self.peers[broker]
        topic = self._topic(f"consume-{parts}")
        create_topic(peer.bootstrap, topic, parts)
        count = self.p.consume_bytes // self.p.consume_size
        d = self._measured(
            peer, lambda: loadgen.java_produce(self.inst, peer.bootstrap, topic, self.p.consume_size, count, "1")
        )
        self.consume_topics[(broker, parts)] = (topic, count)
        self.meta.setdefault("fill", {})[f"{broker}/p{parts}"] = d
        # page cache warm: read the topic's files once (other topics' dirs may be going away)
        for d in Path(peer.data_dir).glob(f"{topic}-*"):
            for f in list(d.iterdir()):
                try:
                    with open(f, "rb") as fh:
                        while fh.read(1 << 22):
                            pass
                except (FileNotFoundError, IsADirectoryError):
                    pass

    def step_consume(self, client: str, parts: int, broker: str, pair: int) -> None:
        cname = {"ck": "confluent-kafka", "java": "kafka-consumer-perf-test", "ours": "logbroker client"}[client]
        config = f"{self.p.consume_bytes >> 20} MiB of 1 KiB records, {parts} partition{'s' if parts > 1 else ''}"
        if client == "ours" and not ours.AVAILABLE:
            self.samples.append(Sample("consume", cname, config, broker, pair, None, "MB/s", {}, ours.REASON))
            return
        if client == "java":
            prior = [
                s
                for s in self.samples
                if s.metric == "consume" and s.client == cname and s.broker == broker and s.error
            ]
            if prior:  # fails the same way every time: do not spend the run on it again
                self.samples.append(Sample("consume", cname, config, broker, pair, None, "MB/s", {}, prior[0].error))
                return
        peer = self.peers[broker]
        topic, count = self.consume_topics[(broker, parts)]

        def run() -> dict:
            if client == "ck":
                return loadgen.ck_consume(peer.bootstrap, topic, parts, count)
            if client == "java":
                return loadgen.java_consume(self.inst, peer.bootstrap, topic, self.p.consume_size, count)
            return loadgen.ours_consume(peer.bootstrap, topic, parts, count)

        self._record("consume", cname, config, broker, pair, lambda: self._measured(peer, run))

    def _e2e_params(self, variant: str) -> tuple[float, float]:
        if variant == "main":
            return self.p.e2e_rate, self.p.e2e_linger
        return self.p.e2e_req_rate, 0.0

    def step_e2e_warmup(self) -> None:
        """Untimed: a short run of each latency workload per broker (JIT, connections)."""
        for variant in ("main", "requests"):
            rate, linger = self._e2e_params(variant)
            for peer in self.peers.values():
                topic = self._topic("e2e-warm")
                self._create(peer, topic, 1)
                try:
                    loadgen.e2e(
                        peer.bootstrap, topic, rate, 2.0, self.p.e2e_size, 0, acks=self.e2e_acks, linger_ms=linger
                    )
                except loadgen.LoadError as e:
                    self.log(f"latency warm-up on {peer.name}: {e}")
                delete_topic(peer.bootstrap, topic)

    def step_e2e(self, variant: str, broker: str, pair: int) -> None:
        peer = self.peers[broker]
        topic = self._topic("e2e")
        self._create(peer, topic, 1)
        p = self.p
        rate, linger = self._e2e_params(variant)
        acks = self.e2e_acks
        config = self._config(f"{rate:g} msg/s x {p.e2e_size} B, linger.ms={linger:g}, acks={acks}, 1 partition")
        metric = "e2e" if variant == "main" else "e2e_req"

        def run() -> dict:
            return self._measured(
                peer,
                lambda: loadgen.e2e(
                    peer.bootstrap, topic, rate, p.e2e_seconds, p.e2e_size, p.e2e_skip, acks=acks, linger_ms=linger
                ),
                topic,
            )

        self._record(metric, "confluent-kafka", config, broker, pair, run, unit="ms", value_of=lambda d: d["p99_ms"])
        delete_topic(peer.bootstrap, topic)

    def step_profile(self, what: str) -> None:
        peer = self.peers["logbroker"]
        if shutil.which("py-spy") is None:
            self.meta.setdefault("profile_errors", {})[what] = "py-spy not installed"
            return
        out = self.out_dir / f"profile-{what}.txt"
        spy = subprocess.Popen(
            [
                "py-spy",
                "record",
                "--pid",
                str(peer.pid),
                "--rate",
                "200",
                "--native",
                "--format",
                "raw",
                "-o",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(1.0)
        try:
            if what == "produce":
                topic = self._topic("prof")
                create_topic(peer.bootstrap, topic, 1)
                d = self._measured(
                    peer,
                    lambda: loadgen.java_produce(
                        self.inst, peer.bootstrap, topic, 1024, self.p.java_records[1024], "1"
                    ),
                )
                delete_topic(peer.bootstrap, topic)
            elif what == "produce-acks-all":
                topic = self._topic("prof")
                create_topic(peer.bootstrap, topic, 1)
                d = self._measured(
                    peer, lambda: loadgen.ck_produce(peer.bootstrap, topic, 1024, self.p.ck_records[1024], "all")
                )
                delete_topic(peer.bootstrap, topic)
            else:
                topic, count = self.consume_topics[("logbroker", 8)]
                d = self._measured(peer, lambda: loadgen.ck_consume(peer.bootstrap, topic, 8, count))
        finally:
            spy.send_signal(signal.SIGINT)
            try:
                _, err = spy.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                spy.kill()
                _, err = spy.communicate()
        if out.exists():
            self.profiles[what] = out
            self.meta.setdefault("profile_runs", {})[what] = {
                "mbps": d["bytes"] / d["seconds"] / 1e6,
                "broker_cpu_s": d["broker_cpu_s"],
            }
        else:
            self.meta.setdefault("profile_errors", {})[what] = (err or b"").decode(errors="replace")[-300:]

    def step_stop_both(self) -> None:
        for peer in self.peers.values():
            peer.stop()
        self.peers.clear()

    # -- run -------------------------------------------------------------------------------
    def run(self, progress: bool = True) -> None:
        steps = self.plan()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.meta["started"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        self.meta["loadavg_before"] = os.getloadavg()
        t0 = time.monotonic()
        self.sampler.start()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(
                total=sum(s.weight for s in steps),
                unit="step",
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} [{elapsed}<{remaining}]",
            )
            self.log = bar.write
        try:
            for s in steps:
                if bar is not None:
                    bar.set_description(s.label[:60])
                ts = time.monotonic()
                try:
                    s.fn()
                except Exception:  # noqa: BLE001 - one broken step must not lose the rest
                    msg = traceback.format_exc(limit=3)
                    self.meta.setdefault("step_errors", []).append({"step": s.label, "error": msg[-800:]})
                    self.log(f"step failed: {s.label}\n{msg}")
                    if s.fn == self.step_install or s.fn == self.step_start_both:
                        raise
                self.meta.setdefault("step_seconds", []).append([s.label, round(time.monotonic() - ts, 2)])
                self.meta["loadavg_max"] = max(self.meta.get("loadavg_max", 0.0), os.getloadavg()[0])
                if bar is not None:
                    bar.update(s.weight)
        finally:
            if bar is not None:
                bar.close()
            self.step_stop_both()
            self.sampler.done.set()
            self.meta["seconds"] = time.monotonic() - t0
            self.save()

    def save(self) -> Path:
        f = self.out_dir / "results.json"
        f.write_text(
            json.dumps(
                {
                    "meta": self.meta,
                    "samples": [asdict(s) for s in self.samples],
                    "profiles": {k: str(v) for k, v in self.profiles.items()},
                },
                indent=1,
                default=str,
            )
        )
        return f

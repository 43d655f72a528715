"""Turn results.json into the docs section (markdown between the side-by-side markers of
docs/benchmarks.md) and PNG plots (matplotlib)."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from pathlib import Path

START = "<!-- side-by-side:start -->"
END = "<!-- side-by-side:end -->"
HERE = Path(__file__).resolve().parent
ANALYSIS = HERE / "analysis.md"

# metric -> (direction, threshold) on the ratio logbroker / Kafka
GOALS = {
    "produce": (">=", 1.5),
    "consume": (">=", 1.5),
    "e2e_p99": ("<=", 0.5),
    "coldstart": ("<=", 0.1),
    "idle_rss": ("<=", 0.25),
}
SENDFILE_GOAL = 0.5
# Broker CPU (issue 11): per GB produced and consumed, and per record at one request per record.
CPU_GOAL = ("<=", 0.5)
LABEL = {
    "produce": "Produce",
    "consume": "Consume",
    "coldstart": "Cold start to first produce",
    "idle_rss": "Idle RSS",
    "e2e_p50": "End-to-end latency p50",
    "e2e_p99": "End-to-end latency p99",
    "e2e_p999": "End-to-end latency p99.9",
    "e2e_p50_req": "End-to-end latency p50 (one request per record)",
    "e2e_p99_req": "End-to-end latency p99 (one request per record)",
    "e2e_p999_req": "End-to-end latency p99.9 (one request per record)",
}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, unit: str) -> str:
    if v is None:
        return "n/a"
    if unit == "MB/s":
        return f"{v:,.1f} MB/s"
    if unit == "ms":
        return f"{v:,.2f} ms" if v < 10 else f"{v:,.1f} ms"
    if unit == "s":
        return f"{v:.3f} s" if v < 1 else f"{v:.2f} s"
    if unit == "MB":
        return f"{v:,.0f} MB"
    if unit == "s/GB":
        return f"{v:.2f} s/GB"
    if unit == "us":
        return f"{v:,.0f} us"
    return f"{v:g} {unit}"


def rfmt(r) -> str:
    return "n/a" if r is None else f"{r:.2f}x"


def met(ratio, goal) -> str:
    if goal is None:
        return ""
    if ratio is None:
        return "not measured"
    op, thr = goal
    ok = ratio >= thr if op == ">=" else ratio <= thr
    return "met" if ok else "**NOT MET**"


class Rows:
    """Samples grouped by (metric, client, config) with per-pair values for both brokers."""

    def __init__(self, samples: list[dict], pairs: int):
        self.pairs = pairs
        self.groups: dict[tuple, dict] = {}
        order: list[tuple] = []
        for s in samples:
            key = (s["metric"], s["client"], s["config"])
            if key not in self.groups:
                self.groups[key] = {"unit": s["unit"], "logbroker": {}, "kafka": {}, "errors": {}}
                order.append(key)
            g = self.groups[key]
            g[s["broker"]][s["pair"]] = s
            if s["error"]:
                g["errors"].setdefault(s["broker"], s["error"])
        self.order = order

    def values(self, key, broker, value=lambda s: s["value"]):
        g = self.groups[key]
        return [
            value(g[broker][i]) if i in g[broker] and g[broker][i]["value"] is not None else None
            for i in range(self.pairs)
        ]

    def ratios(self, key, value=lambda s: s["value"]):
        a, b = self.values(key, "logbroker", value), self.values(key, "kafka", value)
        return [x / y if x is not None and y not in (None, 0) else None for x, y in zip(a, b)]


def _e2e_value(field):
    return lambda s: s["extra"].get(field) if s["value"] is not None else None


def table_rows(res: dict) -> list[dict]:
    """One dict per table row: what, client, config, medians, per-pair ratios, goal, met."""
    pairs = res["meta"]["profile"]["pairs"]
    rows = Rows(res["samples"], pairs)
    out = []
    sendfile = res["meta"].get("limits", {}).get("sendfile", {}).get("median")
    for key in rows.order:
        metric, client, config = key
        g = rows.groups[key]
        variants = [(metric, lambda s: s["value"], g["unit"])]
        if metric in ("e2e", "e2e_req"):
            sfx = "" if metric == "e2e" else "_req"
            variants = [
                (f"e2e_p50{sfx}", _e2e_value("p50_ms"), "ms"),
                (f"e2e_p99{sfx}", _e2e_value("p99_ms"), "ms"),
                (f"e2e_p999{sfx}", _e2e_value("p999_ms"), "ms"),
            ]
        for name, value, unit in variants:
            lb, kf = rows.values(key, "logbroker", value), rows.values(key, "kafka", value)
            ratios = rows.ratios(key, value)
            row = {
                "metric": name,
                "what": LABEL.get(name, name),
                "client": client,
                "config": config,
                "unit": unit,
                "lb": med(lb),
                "kafka": med(kf),
                "lb_pairs": lb,
                "kafka_pairs": kf,
                "ratios": ratios,
                "ratio": med(ratios),
                "goal": GOALS.get(name),
                "errors": g["errors"],
            }
            out.append(row)
            if name == "consume" and sendfile and client == "confluent-kafka":
                share = row["lb"] / sendfile if row["lb"] else None
                kshare = row["kafka"] / sendfile if row["kafka"] else None
                out.append(
                    {
                        "metric": "consume_sendfile",
                        "what": "Consume as a share of the sendfile limit",
                        "client": client,
                        "config": config,
                        "unit": "%",
                        "lb": share,
                        "kafka": kshare,
                        "lb_pairs": [],
                        "kafka_pairs": [],
                        "ratios": [],
                        "ratio": share,
                        "goal": (">=", SENDFILE_GOAL),
                        "errors": {},
                    }
                )
    return out


def resource_rows(res: dict) -> list[dict]:
    """CPU seconds per GB moved and peak RSS under load, per broker, per pair."""
    pairs = res["meta"]["profile"]["pairs"]
    out = []
    for metric, client, label, short in (
        (
            "produce",
            "kafka-producer-perf-test",
            "CPU per GB produced (kafka-producer-perf-test runs)",
            "CPU s per GB produced, perf-test",
        ),
        (
            "produce",
            "confluent-kafka",
            "CPU per GB produced (confluent-kafka runs)",
            "CPU s per GB produced, confluent-kafka",
        ),
        (
            "consume",
            "confluent-kafka",
            "CPU per GB consumed (confluent-kafka runs)",
            "CPU s per GB consumed, confluent-kafka",
        ),
    ):
        per = {}
        for b in ("logbroker", "kafka"):
            vals = []
            for i in range(pairs):
                cpu = nbytes = 0.0
                for s in res["samples"]:
                    if (
                        s["metric"] == metric
                        and s["client"] == client
                        and s["broker"] == b
                        and s["pair"] == i
                        and s["value"] is not None
                    ):
                        size = s["extra"]["bytes"] / max(1, s["extra"]["records"])
                        cpu += s["extra"]["broker_cpu_s"]
                        nbytes += s["extra"].get("total_records", s["extra"]["records"]) * size
                vals.append(cpu / (nbytes / 1e9) if nbytes else None)
            per[b] = vals
        ratios = [x / y if x is not None and y else None for x, y in zip(per["logbroker"], per["kafka"])]
        out.append(
            {
                "what": label,
                "short": short,
                "unit": "s/GB",
                "lb": med(per["logbroker"]),
                "kafka": med(per["kafka"]),
                "ratios": ratios,
                "ratio": med(ratios),
                "goal": CPU_GOAL,
            }
        )
    per = {}
    for b in ("logbroker", "kafka"):
        per[b] = [
            None if s["extra"].get("records") is None else 1e6 * s["extra"]["broker_cpu_s"] / s["extra"]["records"]
            for s in sorted(res["samples"], key=lambda s: s["pair"])
            if s["metric"] == "e2e_req" and s["broker"] == b and s["value"] is not None
        ]
    ratios = [x / y if x is not None and y else None for x, y in zip(per["logbroker"], per["kafka"])]
    out.append(
        {
            "what": "CPU per record at one produce request per record (latency run; includes the consumer's fetches)",
            "short": "CPU per record, one request per record",
            "unit": "us",
            "lb": med(per["logbroker"]),
            "kafka": med(per["kafka"]),
            "ratios": ratios,
            "ratio": med(ratios),
            "goal": CPU_GOAL,
        }
    )
    peaks = {}
    for b in ("logbroker", "kafka"):
        vals = [
            s["extra"].get("broker_peak_rss")
            for s in res["samples"]
            if s["broker"] == b and s["value"] is not None and s["metric"] in ("produce", "consume", "e2e", "e2e_req")
        ]
        vals = [v for v in vals if v]
        peaks[b] = max(vals) / 1e6 if vals else None
    out.append(
        {
            "what": "Peak RSS under load (max over all produce/consume/latency runs)",
            "short": "Peak RSS under load",
            "unit": "MB",
            "goal": None,
            "lb": peaks["logbroker"],
            "kafka": peaks["kafka"],
            "ratios": [],
            "ratio": peaks["logbroker"] / peaks["kafka"] if peaks["logbroker"] and peaks["kafka"] else None,
        }
    )
    return out


def core_rows(res: dict) -> list[dict]:
    out = []
    for metric, client, label in (
        ("produce", "kafka-producer-perf-test", "produce, kafka-producer-perf-test"),
        ("produce", "confluent-kafka", "produce, confluent-kafka"),
        ("consume", "confluent-kafka", "consume, confluent-kafka"),
        ("e2e", "confluent-kafka", "latency, 5k msg/s"),
        ("e2e_req", "confluent-kafka", "latency, one request per record"),
    ):
        row = {"what": label}
        ok = True
        for b, k in (("logbroker", "lb"), ("kafka", "kf")):
            runs = [
                s["extra"]
                for s in res["samples"]
                if s["metric"] == metric
                and s["client"] == client
                and s["broker"] == b
                and s["value"] is not None
                and s["extra"].get("wall_s")
            ]
            if not runs:
                ok = False
                break
            row[f"{k}_b"] = med([e["broker_cpu_s"] / e["wall_s"] for e in runs])
            row[f"{k}_c"] = med([e["client_cpu_s"] / e["wall_s"] for e in runs])
        if ok:
            out.append(row)
    return out


# -- profile ----------------------------------------------------------------------------------
_HASH = re.compile(r"::h[0-9a-f]{16}")
_LINE = re.compile(r":\d+\)$")
_SOCKET = {
    "send",
    "sendmsg",
    "sendto",
    "recv",
    "recvfrom",
    "recvmsg",
    "sendfile",
    "sendfile64",
    "writev",
    "readv",
    "__send",
    "__recv",
}


def _norm(frame: str) -> str:
    frame = _HASH.sub("", frame)
    frame = _LINE.sub(")", frame)
    if re.match(r"^0x[0-9a-f]+ \(", frame):
        frame = "[unsymbolized] " + frame.split(" ", 1)[1]
    return frame


def _idle(frames: list[str]) -> bool:
    s = ";".join(frames)
    if "EpollIOManager.get_events" in s:
        return True  # the trio loop waiting for I/O
    if "WorkerThread._work" in s and "_handle_job" not in s:
        return True  # a trio worker thread waiting for a job
    return False


def _category(frames: list[str]) -> str:
    if any("WakeupSocketpair" in f or "run_sync_soon" in f or "start_thread_soon" in f for f in frames):
        return "thread hand-off (trio.to_thread)"
    for f in reversed(frames):
        name = f.split(" (", 1)[0]
        if name in _SOCKET:
            return "socket syscalls (send/recv/sendfile)"
        if name in ("pwrite64", "pwrite", "write", "fdatasync", "fsync", "pread64", "read") and "libc" in f:
            return "file I/O syscalls"
        if ".rs:" in f or ".rs)" in f:
            return "Rust core (logbroker._core)"
        if "logbroker/protocol" in f:
            return "Kafka codec (Python, logbroker/protocol)"
        if "trio/_threads" in f or "_thread_cache" in f or "_entry_queue" in f or "wakeup_thread" in f:
            return "thread hand-off (trio.to_thread)"
        if "logbroker/broker/handlers" in f:
            return "request handlers (Python, logbroker/broker/handlers)"
        if "logbroker/" in f:
            return "server and partitions (Python, logbroker/*)"
        if "trio/" in f or "outcome/" in f:
            return "trio scheduler and socket wrappers"
    return "other (interpreter, libc)"


def analyse_profile(path: Path, top: int = 8) -> dict:
    total = idle = 0
    self_c: Counter = Counter()
    incl: Counter = Counter()
    cats: Counter = Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if not n.isdigit():
            continue
        n = int(n)
        frames = stack.split(";")
        total += n
        if _idle(frames):
            idle += n
            continue
        self_c[_norm(frames[-1])] += n
        cats[_category(frames)] += n
        for f in {_norm(f) for f in frames if "logbroker" in f and (".py" in f or ".rs" in f)}:
            incl[f] += n
    busy = total - idle
    return {
        "samples": total,
        "busy": busy,
        "self": [(f, n / busy) for f, n in self_c.most_common(top)] if busy else [],
        "inclusive": [(f, n / busy) for f, n in incl.most_common(top)] if busy else [],
        "categories": [(c, n / busy) for c, n in cats.most_common()] if busy else [],
    }


# -- plots ------------------------------------------------------------------------------------
COLORS = {"logbroker": "#1f77b4", "kafka": "#d62728"}


def plots(res: dict, img_dir: Path, prefix: str = "side-by-side") -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    rows = table_rows(res)
    out = {}
    kv = res["meta"].get("kafka_version", "?")

    # throughput: produce and consume rows with a value for at least one broker, one panel each
    sf = res["meta"].get("limits", {}).get("sendfile", {}).get("median")
    panels = [(m, [r for r in rows if r["metric"] == m and (r["lb"] or r["kafka"])]) for m in ("produce", "consume")]
    panels = [(m, tp) for m, tp in panels if tp]
    if panels:
        heights = [len(tp) + 1.5 for _, tp in panels]
        fig, axes = plt.subplots(
            len(panels),
            1,
            figsize=(10, 0.36 * sum(heights) + 1.2),
            gridspec_kw={"height_ratios": heights},
            squeeze=False,
        )
        for ax, (m, tp) in zip(axes[:, 0], panels):
            ys = list(range(len(tp)))[::-1]
            h = 0.38
            for j, b in enumerate(("logbroker", "kafka")):
                key, pk = ("lb", "lb_pairs") if b == "logbroker" else ("kafka", "kafka_pairs")
                pos = [y + (h / 2 if j == 0 else -h / 2) for y in ys]
                ax.barh(
                    pos,
                    [r[key] or 0 for r in tp],
                    height=h,
                    color=COLORS[b],
                    label=b if b == "logbroker" else f"Kafka {kv}",
                )
                for p, r in zip(pos, tp):
                    pts = [v for v in r[pk] if v is not None]
                    ax.plot(pts, [p] * len(pts), "k|", ms=7)
            ax.set_yticks(ys)
            ax.set_yticklabels([f"{r['config']} · {_short(r['client'])}" for r in tp], fontsize=8)
            if m == "consume" and sf:
                ax.axvline(sf, color="gray", ls="--", lw=1, label=f"sendfile limit ({sf:,.0f})")
                ax.axvline(sf * 0.5, color="gray", ls=":", lw=1, label="50% of it (goal)")
            ax.set_title(f"{m.capitalize()} throughput, MB/s (bar = median, ticks = single runs)", fontsize=10)
            ax.legend(loc="lower right", fontsize=8)
            ax.grid(axis="x", alpha=0.3)
        fig.suptitle("logbroker vs Apache Kafka, same machine, same run (higher is better)", fontsize=10)
        fig.tight_layout()
        out["throughput"] = img_dir / f"{prefix}-throughput.png"
        fig.savefig(out["throughput"], dpi=110)
        plt.close(fig)

    lat = [r for r in rows if r["metric"].startswith("e2e_")]
    if lat:
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = range(len(lat))
        w = 0.38
        for j, b in enumerate(("logbroker", "kafka")):
            key, pk = ("lb", "lb_pairs") if b == "logbroker" else ("kafka", "kafka_pairs")
            pos = [x + (-w / 2 if j == 0 else w / 2) for x in xs]
            ax.bar(
                pos,
                [r[key] or 0 for r in lat],
                width=w,
                color=COLORS[b],
                label=b if b == "logbroker" else f"Kafka {kv}",
            )
            for p, r in zip(pos, lat):
                pts = [v for v in r[pk] if v is not None]
                ax.plot([p] * len(pts), pts, "k_", ms=10)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(
            [
                r["what"].replace("End-to-end latency ", "").replace(" (one request per record)", "")
                + "\n"
                + r["config"].split(" x ")[0]
                + ("\nlinger.ms=0" if "one request" in r["what"] else "")
                for r in lat
            ],
            fontsize=7,
        )
        ax.set_yscale("log")
        ax.set_ylabel("produce -> consume latency, ms (log scale)")
        ax.set_title(
            "End-to-end latency: " + "; ".join(sorted({r["config"].rsplit(", acks", 1)[0] for r in lat})), fontsize=8
        )
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3, which="both")
        fig.tight_layout()
        out["latency"] = img_dir / f"{prefix}-latency.png"
        fig.savefig(out["latency"], dpi=110)
        plt.close(fig)

    res_rows = resource_rows(res)
    panels = [r for r in rows if r["metric"] in ("coldstart", "idle_rss")] + [
        r for r in res_rows if r["lb"] or r["kafka"]
    ]
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(2.3 * len(panels), 3.4))
        for ax, r in zip(axes if len(panels) > 1 else [axes], panels):
            ax.bar([0, 1], [r["lb"] or 0, r["kafka"] or 0], color=[COLORS["logbroker"], COLORS["kafka"]])
            ax.set_xticks([0, 1])
            ax.set_xticklabels(["logbroker", "Kafka"], fontsize=8)
            ax.set_title(_wrap(r.get("short", r["what"].split(" (")[0]), 22), fontsize=8)
            ax.set_ylabel(r["unit"], fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
        who = (
            f"sum of the {res['meta']['nodes']} broker processes" if res["meta"].get("nodes") else "broker process only"
        )
        fig.suptitle(f"Start-up, memory and CPU cost ({who}; lower is better)", fontsize=9)
        fig.tight_layout()
        out["resources"] = img_dir / f"{prefix}-resources.png"
        fig.savefig(out["resources"], dpi=110)
        plt.close(fig)
    return out


def _short(client: str) -> str:
    return {"kafka-producer-perf-test": "java perf-test", "kafka-consumer-perf-test": "java perf-test"}.get(
        client, client
    )


def _wrap(text: str, width: int) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    lines.append(cur)
    return "\n".join(lines)


# -- markdown ---------------------------------------------------------------------------------
def markdown(res: dict, images: dict[str, Path], docs_path: Path, command: str) -> str:
    meta = res["meta"]
    prof = meta["profile"]
    rows = table_rows(res)
    L: list[str] = []
    a = L.append
    a("## Side by side with Apache Kafka")
    a("")
    a(
        f"Run: {meta.get('started', '?')}, profile `{prof['name']}`, {prof['pairs']} A/B pair(s) per workload, "
        f"{meta.get('seconds', 0) / 60:.1f} min in all; load average before the run "
        f"{', '.join(f'{x:.2f}' for x in meta.get('loadavg_before', []))}"
        + (
            f", highest 1-min load average seen between steps {meta['loadavg_max']:.2f}"
            if "loadavg_max" in meta
            else ""
        )
        + f". Machine: {meta.get('machine', '?')}. (The load average counts the JVMs' threads too, so the "
        "benchmark alone drives it well above 2 on this machine.)"
    )
    a("")
    a(
        "Reproduce (installs Kafka from Maven Central into `~/.cache/logbroker-bench/` on first use; "
        "`pip install -r benches/requirements.txt` first):"
    )
    a("")
    a(f"    {command}")
    a("")
    a(
        "`--quick` (one pair, small volumes, about 3 minutes) is the smoke run; it writes to "
        "`benches/.results/` and leaves this page alone."
    )
    a("")
    a("### How it is measured")
    a("")
    a(
        f"- **Peers.** logbroker (`python -m logbroker serve`, the installed wheel) and Apache Kafka "
        f"{meta.get('kafka_version', '?')} (`kafka.Kafka`, KRaft combined mode: broker and controller in one JVM, "
        "one node), each on loopback with its data in a fresh temp directory on the same disk. "
        + _kafka_version_note(meta)
    )
    a(
        "- **Order.** Every workload runs against logbroker, then Kafka, then logbroker, then Kafka (A B A B ...). "
        "The table gives each broker's median and the median of the per-pair ratios logbroker / Kafka; the "
        "per-pair ratios are listed. Cold start and idle RSS use a fresh broker per run; for everything else "
        "both brokers stay up and the one not under test idles."
    )
    a(
        "- **Load generators that are not ours.** Kafka's `kafka-producer-perf-test` "
        "(`org.apache.kafka.tools.ProducerPerformance` from kafka-tools, run with java, `-Xmx512m`; the rate is "
        f"its steady-state line, after `--warmup-records` = {int(100 * 0.2)}% of the records), "
        "`kafka-consumer-perf-test` (`ConsumerPerformance`) where it can run, and confluent-kafka "
        "(librdkafka) from Python in its own process (`benches/compare/ck_worker.py`). Both producers: "
        "`linger.ms=10`, `batch.size=262144`, no compression, no key (sticky partitioning). acks=all "
        "turns on the idempotent producer (InitProducerId), acks=1 does not."
    )
    ours_ran = any(s["client"] == "logbroker client" and s["value"] is not None for s in res["samples"])
    if ours_ran:
        a(
            "- **Our own client** is the third client: `logbroker.Producer` / `logbroker.Consumer` from the installed "
            "wheel, in its own process (`benches/compare/ours.py`), with the same settings as confluent-kafka "
            "(`linger.ms=10`, `batch.size=262144`, idempotence only with acks=all; the consumer assigns every "
            "partition without a group, clock from the first batch), against both brokers in the same pairs."
        )
    else:
        a(
            "- **Our own client** is the third client. The installed logbroker had none when this ran, so its rows "
            "say n/a; the hook is `benches/compare/ours.py`, which runs it as soon as `logbroker.Producer` and "
            "`logbroker.Consumer` exist."
        )
    a(
        "- **Consumers.** The confluent-kafka consume runs use `assign()` from offset 0 of every partition and never "
        "join a group, so they time the fetch path alone (librdkafka still wants a `group.id`; it only looks the "
        "coordinator up), with `fetch.queue.backoff.ms=1` (at librdkafka's default of 1000 ms a partition "
        "stops fetching for a second whenever 100,000 records are queued, which hides the broker). Their clock "
        "starts at the first batch received. `kafka-consumer-perf-test` always "
        "subscribes with a consumer group (`--group` defaults to a random `perf-consumer-N`); it runs against a "
        "broker only if that broker has a group coordinator, and its rate is its fetch rate, which leaves the "
        "group join out (the join time is listed under the table)."
    )
    a(
        f"- **Produce volume per run:** perf-test {prof['java_records']['1024']:,} x 1 KiB or "
        f"{prof['java_records']['100']:,} x 100 B records; confluent-kafka {prof['ck_records']['1024']:,} x 1 KiB "
        f"or {prof['ck_records']['100']:,} x 100 B. Each run gets a new topic (admin API, replication factor 1), "
        "deleted afterwards."
    )
    a(
        f"- **Consume:** a {prof['consume_bytes'] >> 20} MiB topic of 1 KiB records per broker and partition count, "
        "written once per run by the perf-test producer (acks=1), its files then read once so the page cache is "
        "warm; every consume run reads it all from offset 0."
    )
    a(
        f"- **End-to-end latency:** a confluent-kafka producer at a fixed {prof['e2e_rate']:g} msg/s of "
        f"{prof['e2e_size']} B (acks=1, `linger.ms={prof.get('e2e_linger', 1):g}`, paced by the clock without "
        "spinning) stamps CLOCK_MONOTONIC into each record; a confluent-kafka consumer in another process (assign, "
        "`fetch.wait.max.ms=100`, `poll()` per record) takes receive - send. "
        f"{prof['e2e_seconds']:g} s per run, the first {prof['e2e_skip']} records dropped as warm-up, after an "
        "untimed warm-up run per broker. That rate is well below either broker's byte-rate limit. A second, "
        f"informational point runs {prof.get('e2e_req_rate', 2000):g} msg/s with `linger.ms=0`, i.e. one produce "
        "request per record, which measures the request rate a broker sustains rather than its byte rate."
    )
    a(
        "- **Cold start:** process spawn to the first produce acknowledged with acks=all (the client polls the "
        "port every 10 ms, creates a topic, produces one record). Kafka's storage format (`kafka-storage format`, "
        "a separate JVM run before the start) is not included; its time is listed below."
    )
    a(
        f"- **Memory and CPU:** the broker process only: `/proc/<pid>/status` VmRSS (idle = "
        f"{prof['idle_wait']:g} s after ready, one topic, no traffic; under load = 10 Hz peak during the runs) and "
        "`/proc/<pid>/stat` utime+stime of all its threads, per GB of record payload moved."
    )
    a("- MB = 10^6 bytes, counting record payload only.")
    a("")
    a("#### Equivalent settings")
    a("")
    a(_settings_table(meta))
    a("")
    lim = meta.get("limits")
    if lim:
        a("#### The machine's limits (same harness, same run)")
        a("")
        a(f"Median of {lim['repeats']} runs of {lim['bytes'] >> 20} MiB each, in MB/s:")
        a("")
        a("| limit | MB/s | runs |")
        a("| --- | ---: | --- |")
        for k, label in (
            ("loopback_tcp", "loopback TCP, 1 MiB send() / recv_into(), two processes"),
            ("sendfile", "sendfile() of a page-cached file to a loopback socket"),
            ("write_buffered", "sequential 1 MiB write()s to the data disk, final fdatasync excluded"),
            ("write_fdatasync", "sequential 1 MiB write()s to the data disk, final fdatasync included"),
        ):
            a(f"| {label} | {lim[k]['median']:,.0f} | {', '.join(f'{x:,.0f}' for x in lim[k]['runs'])} |")
        a("")
    a("### Results")
    a("")
    a(
        "Ratio = logbroker / Kafka, the median of the per-pair ratios (higher is better for MB/s, lower for "
        "latency, time and memory)."
    )
    a("")
    a("| workload | config | client | logbroker | Kafka | ratio | per-pair ratios | goal | |")
    a("| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |")
    for r in rows:
        goal = r["goal"]
        gtxt = f"{goal[0]} {goal[1]:g}x" if goal else ""
        if r["metric"] == "consume_sendfile":
            lb = f"{r['lb']:.0%}" if r["lb"] is not None else "n/a"
            kf = f"{r['kafka']:.0%}" if r["kafka"] is not None else "n/a"
            a(
                f"| {r['what']} | {r['config']} | {r['client']} | {lb} | {kf} |  |  | >= {SENDFILE_GOAL:.0%} "
                f"(logbroker) | {met(r['ratio'], goal)} |"
            )
            continue
        lb, kf = value_cells(r)
        pr = pairs_text(r["ratios"])
        a(
            f"| {r['what']} | {r['config']} | {r['client']} | {lb} | {kf} | {rfmt(r['ratio'])} | {pr} | {gtxt} | "
            f"{met(r['ratio'], goal) if (r['lb'] is not None or r['kafka'] is not None) else ''} |"
        )
    a("")
    a("Broker resources (the broker process only; lower is better):")
    a("")
    a("| broker process | logbroker | Kafka | ratio | per-pair ratios | goal | |")
    a("| --- | ---: | ---: | ---: | --- | --- | --- |")
    for r in resource_rows(res):
        pr = ", ".join("–" if x is None else f"{x:.2f}" for x in r["ratios"])
        goal = r.get("goal")
        gtxt = f"{goal[0]} {goal[1]:g}x" if goal else ""
        a(
            f"| {r['what']} | {fmt(r['lb'], r['unit'])} | {fmt(r['kafka'], r['unit'])} | {rfmt(r['ratio'])} | {pr} | "
            f"{gtxt} | {met(r['ratio'], goal)} |"
        )
    a("")
    a(
        "Where the two cores went during the runs (median over runs; cores = CPU seconds / wall seconds; "
        "the load generators are the client processes):"
    )
    a("")
    a("| runs | broker cores, logbroker | client cores, vs logbroker | broker cores, Kafka | client cores, vs Kafka |")
    a("| --- | ---: | ---: | ---: | ---: |")
    for r in core_rows(res):
        a(f"| {r['what']} | {r['lb_b']:.2f} | {r['lb_c']:.2f} | {r['kf_b']:.2f} | {r['kf_c']:.2f} |")
    fmts = [
        s["extra"].get("format_s")
        for s in res["samples"]
        if s["metric"] == "coldstart" and s["broker"] == "kafka" and s["extra"].get("format_s")
    ]
    lst = {
        b: med(
            [
                s["extra"].get("listening_s")
                for s in res["samples"]
                if s["metric"] == "coldstart" and s["broker"] == b and s["value"] is not None
            ]
        )
        for b in ("logbroker", "kafka")
    }
    a("")
    if fmts:
        a(
            f"Kafka's storage format before each cold start took {med(fmts):.2f} s (median, not counted above). "
            f"Spawn to listening socket: logbroker {fmt(lst['logbroker'], 's')}, Kafka {fmt(lst['kafka'], 's')}."
        )
        a("")
    rb = {
        b: med(
            [
                s["extra"].get("rebalance_ms")
                for s in res["samples"]
                if s["client"] == "kafka-consumer-perf-test" and s["broker"] == b and s["value"] is not None
            ]
        )
        for b in ("logbroker", "kafka")
    }
    if any(v is not None for v in rb.values()):
        a(
            "kafka-consumer-perf-test group join (its `rebalance.time.ms`, median): "
            + ", ".join(f"{b} {v:,.0f} ms" for b, v in rb.items() if v is not None)
            + "."
        )
        a("")
    if images:
        a("### Plots")
        a("")
        for k, p in images.items():
            rel = _rel(p, docs_path.parent)
            a(f"![{k}]({rel})")
            a("")
    profs = res.get("profiles", {})
    if profs:
        a("### Where logbroker's time goes (py-spy)")
        a("")
        runs = meta.get("profile_runs", {})
        a(
            "`py-spy record --native --rate 200` on the logbroker process during one extra run of each kind "
            "(not counted in the table). Shares are of the samples in which a thread was busy (the trio loop "
            "waiting in epoll and idle worker threads are left out). py-spy samples the threads that run "
            "Python: Produce and Fetch are served on the Rust network thread, which it does not see, so these "
            "profiles show the control plane at work during the run (admin requests, periodic jobs), not the "
            "data path."
        )
        a("")
        for what, path in profs.items():
            if not Path(path).exists():
                continue
            pa = analyse_profile(Path(path))
            run = runs.get(what, {})
            desc = {
                "produce": "kafka-producer-perf-test, 1 KiB, acks=1, 1 partition",
                "produce-acks-all": "confluent-kafka producer, 1 KiB, acks=all (idempotent), 1 partition",
                "consume": "confluent-kafka reading the 8-partition topic",
            }.get(what, what)
            a(
                f"**{what}** ({desc}: {run.get('mbps', 0):,.0f} MB/s, broker CPU {run.get('broker_cpu_s', 0):.2f} s; "
                f"{pa['busy']} busy of {pa['samples']} samples)"
            )
            a("")
            a("| where (innermost known frame) | share of busy samples |")
            a("| --- | ---: |")
            for c, s in pa["categories"][:8]:
                a(f"| {c} | {s:.0%} |")
            a("")
            a("Top logbroker frames (inclusive): " + "; ".join(f"`{f}` {s:.0%}" for f, s in pa["inclusive"][:6]))
            a("")
            a("Top leaf frames (self): " + "; ".join(f"`{f}` {s:.0%}" for f, s in pa["self"][:6]))
            a("")
    if meta.get("step_errors"):
        a("Steps that failed in this run: " + "; ".join(e["step"] for e in meta["step_errors"]))
        a("")
    if ANALYSIS.exists():
        a(ANALYSIS.read_text().strip())
        a("")
    return "\n".join(L).rstrip() + "\n"


def value_cells(r: dict) -> tuple[str, str]:
    """A table row's logbroker and Kafka cells: the median, or n/a with the error."""
    lb, kf = fmt(r["lb"], r["unit"]), fmt(r["kafka"], r["unit"])
    errs = r["errors"]
    if r["lb"] is None and "logbroker" in errs:
        lb = f"n/a ({_errshort(errs['logbroker'])})"
    if r["kafka"] is None and "kafka" in errs:
        kf = f"n/a ({_errshort(errs['kafka'])})"
    return lb, kf


def pairs_text(ratios: list) -> str:
    return ", ".join("–" if x is None else f"{x:.2f}" for x in ratios) if any(x is not None for x in ratios) else ""


def _kafka_version_note(meta: dict) -> str:
    sk = meta.get("kafka_skipped") or []
    if not sk:
        return "It is the newest 4.x release on Maven Central."
    vs = sorted({s["version"] for s in sk})
    why = sk[0]["reason"]
    m = re.search(r"Could not find artifact ([^ ]+)", why)
    why = f"`{m.group(1)}` is not on Maven Central" if m else why
    return (
        f"Maven Central lists {', '.join(vs)} too, but {why}, so the installer took the newest 4.x whose "
        "whole dependency set resolves."
    )


def _errshort(e: str) -> str:
    if "FIND_COORDINATOR" in e:
        return "needs consumer groups: FindCoordinator unsupported"
    if "has no client" in e or "does not exist yet" in e:
        return "no logbroker client installed"
    return e[:80]


def _settings_table(meta: dict) -> str:
    lb, kf = meta.get("logbroker_settings", {}), meta.get("kafka_settings", {})
    keys = [
        "log.segment.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "message.max.bytes",
        "num.partitions",
        "default.replication.factor",
        "min.insync.replicas",
        "auto.create.topics.enable",
    ]
    lines = ["| setting | logbroker | Kafka |", "| --- | --- | --- |"]
    for k in keys:
        lines.append(f"| `{k}` | {lb.get(k, '')} | {kf.get(k, '')} |")
    lines.append("| fsync per write | no (flush left to the OS page cache) | no (same) |")
    lines.append("| topics in the runs | 1 or 8 partitions, replication factor 1, created with the admin API | same |")
    lines.append(
        "| listener | PLAINTEXT 127.0.0.1, free port | PLAINTEXT 127.0.0.1, free port; CONTROLLER listener on another |"
    )
    lines.append(
        f"| process | {lb.get('(process)', '')} | `java {kf.get('(jvm)', '')} kafka.Kafka` "
        "(heap and GC flags as kafka-server-start.sh sets them) |"
    )
    lines.append(
        "| request threads | one trio event loop; appends and reads in trio worker threads | "
        f"{kf.get('(threads)', '')} |"
    )
    only = [
        "process.roles",
        "controller.quorum.voters",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "group.initial.rebalance.delay.ms",
    ]
    lines.append("| Kafka only | | " + ", ".join(f"`{k}={kf.get(k, '')}`" for k in only) + " |")
    return "\n".join(lines)


def _rel(p: Path, base: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(base.resolve()))
    except ValueError:
        import os

        return os.path.relpath(Path(p).resolve(), base.resolve())


def write_docs(docs_path: Path, section: str, start: str = START, end: str = END) -> None:
    """Replace what lies between the markers `start` and `end`, never anything outside them."""
    if docs_path.exists():
        text = docs_path.read_text()
    else:
        docs_path.parent.mkdir(parents=True, exist_ok=True)
        text = f"{start}\n{end}\n"
    if start not in text or end not in text:
        text = text.rstrip("\n") + f"\n\n{start}\n{end}\n"
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    docs_path.write_text(f"{head}{start}\n{section}{end}{tail}")


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def group_errors(res: dict) -> dict:
    errs = defaultdict(set)
    for s in res["samples"]:
        if s["error"]:
            errs[(s["metric"], s["client"], s["broker"])].add(s["error"])
    return errs

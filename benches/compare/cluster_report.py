"""The three-node comparison's docs section (between the cluster markers of
docs/benchmarks.md), from the results.json that benches/compare/cluster.py writes. Tables
and plots come from the single-node report's functions (benches/compare/report.py); this
module writes the text around them."""

from __future__ import annotations

from pathlib import Path

from benches.compare.report import (
    ANALYSIS,
    _kafka_version_note,
    _rel,
    core_rows,
    fmt,
    med,
    pairs_text,
    resource_rows,
    rfmt,
    table_rows,
    value_cells,
)

START = "<!-- side-by-side-cluster:start -->"
END = "<!-- side-by-side-cluster:end -->"
CLUSTER_ANALYSIS = ANALYSIS.parent / "cluster_analysis.md"


def _settings(meta: dict) -> str:
    lb, kf = meta.get("logbroker_settings", {}), meta.get("kafka_settings", {})
    keys = [
        "default.replication.factor",
        "min.insync.replicas",
        "offsets.topic.replication.factor",
        "log.segment.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "message.max.bytes",
    ]
    out = ["| setting (every node) | logbroker | Kafka |", "| --- | --- | --- |"]
    for k in keys:
        out.append(f"| `{k}` | {lb.get(k, '(default)')} | {kf.get(k, '(default)')} |")
    out.append(
        f"| `controller.quorum.voters` | {lb.get('controller.quorum.voters', '?')} | "
        f"{kf.get('controller.quorum.voters', '?')} |"
    )
    out.append("| process roles | broker and controller (combined) | `process.roles=broker,controller` |")
    out.append("| replica fetchers | one Rust fetch loop per source broker | `num.replica.fetchers=1` (default) |")
    out.append("| `replica.lag.time.max.ms`, `replica.fetch.*` | defaults | defaults |")
    out.append(f"| process | {lb.get('(process)', '?')} | java {kf.get('(jvm)', '?')} kafka.Kafka |")
    return "\n".join(out)


def markdown(res: dict, images: dict[str, Path], docs_path: Path, command: str) -> str:
    meta = res["meta"]
    prof = meta["profile"]
    n, rf, isr = meta.get("nodes", 3), meta.get("replication_factor", 3), meta.get("min_insync_replicas", 2)
    rows = [r for r in table_rows(res) if r["metric"] != "consume_sendfile"]
    L: list[str] = []
    a = L.append
    a(f"## {n} nodes against {n} nodes: replication factor {rf}, acks=all")
    a("")
    a(
        f"Run: {meta.get('started', '?')}, profile `{prof['name']}`, {prof['pairs']} A/B pair(s), "
        f"{meta.get('seconds', 0) / 60:.1f} min in all; load average before the run "
        f"{', '.join(f'{x:.2f}' for x in meta.get('loadavg_before', []))}"
        + (
            f", highest 1-min load average seen between steps {meta['loadavg_max']:.2f}"
            if "loadavg_max" in meta
            else ""
        )
        + f". Machine: {meta.get('machine', '?')}; logbroker at git {meta.get('logbroker_git', '?')}."
    )
    a("")
    a("Reproduce (Kafka from Maven Central, cached as above):")
    a("")
    a(f"    {command}")
    a("")
    a(
        "`--cluster --quick` (one pair, small volumes, a few minutes) writes to `benches/.results/cluster-quick/` "
        "and leaves this page alone."
    )
    a("")
    a("### How it is measured")
    a("")
    a(
        f"- **Clusters.** {n} logbroker nodes (`logbroker serve --node-id i --listen PLAINTEXT://...,CONTROLLER://... "
        f"--voters ...`) against {n} Apache Kafka {meta.get('kafka_version', '?')} nodes (KRaft, "
        "`process.roles=broker,controller`, a static `controller.quorum.voters`, every node formatted with one "
        "cluster id), all on loopback, each node with its own fresh temp data directory on the same disk. "
        + _kafka_version_note(meta)
    )
    a(
        "- **Order.** Each pair starts the logbroker cluster, warms it up (untimed: "
        f"{prof.get('warmup_records', 100_000):,} x 1 KiB with acks=all through kafka-producer-perf-test, a read of "
        "them, a short run of each latency workload), runs every workload, "
        "stops it; then the same for the Kafka cluster. The two clusters never run at the same time. The table "
        "gives each side's median and the median of the per-pair ratios logbroker / Kafka."
    )
    a(
        f"- **Topics.** Every run creates its topic with the admin API with replication factor {rf} "
        f"(`min.insync.replicas={isr}` on every node) and waits until every partition has its {rf} replicas in "
        "the ISR; it is deleted after the run. Right after each run the topic's smallest ISR is read from "
        "Metadata (below): a follower that had fallen behind shows there."
    )
    a(
        "- **Producers.** kafka-producer-perf-test (`ProducerPerformance`, `-Xmx512m`, steady-state rate after "
        f"20% warm-up records; {prof['java_records']['1024']:,} x 1 KiB or {prof['java_records']['100']:,} x 100 B "
        f"per run) and confluent-kafka in its own process ({prof['ck_records']['1024']:,} x 1 KiB or "
        f"{prof['ck_records']['100']:,} x 100 B), both `acks=all` with the idempotent producer, `linger.ms=10`, "
        "`batch.size=262144`, no compression, no key. A produce is acknowledged once the leader's high watermark "
        "passes it, i.e. once every ISR member has the batch."
    )
    a(
        f"- **End-to-end latency.** The single-node workload with `acks=all` and replication factor {rf}: a "
        f"confluent-kafka producer at {prof['e2e_rate']:g} msg/s x {prof['e2e_size']} B (`linger.ms="
        f"{prof.get('e2e_linger', 1):g}`, idempotent) stamps CLOCK_MONOTONIC into each record, a consumer in "
        "another process (assign, `fetch.wait.max.ms=100`) takes receive - send. A consumer only sees a record "
        "below the high watermark, so the figure includes replication to the followers. "
        f"{prof['e2e_seconds']:g} s per run, the first {prof['e2e_skip']:,} records dropped: one second at "
        f"{prof['e2e_rate']:g} msg/s, in which the followers and the consumer make their first fetches of the "
        "new topic, possibly before its leader knows it (see the notes under the results). The second point is "
        f"{prof.get('e2e_req_rate', 2000):g} msg/s with `linger.ms=0` (one produce request per record)."
    )
    a(
        f"- **CPU and memory** are sums over the {n} broker processes: `/proc/<pid>/stat` utime+stime of all "
        "threads over the run, per GB of record payload produced (counted once, not once per replica), and "
        f"VmRSS (idle: {prof['idle_wait']:g} s after the cluster is ready; under load: 10 Hz peak of the sum)."
    )
    a(
        f"- **Cold start** is spawning the {n} processes to the first acks=all produce to a replication-factor-"
        f"{rf} topic (elections, registrations, topic creation included; Kafka's storage format of each node is "
        "not, and is listed below)."
    )
    a("- MB = 10^6 bytes of record payload.")
    a("")
    a("#### Settings")
    a("")
    a(_settings(meta))
    a("")
    a("### Results")
    a("")
    a(
        "Ratio = logbroker / Kafka, the median of the per-pair ratios (higher is better for MB/s, lower for "
        "latency, time, CPU and memory)."
    )
    a("")
    a("| workload | config | client | logbroker | Kafka | ratio | per-pair ratios |")
    a("| --- | --- | --- | ---: | ---: | ---: | --- |")
    for r in rows:
        lb, kf = value_cells(r)
        what = r["what"] if r["metric"] != "idle_rss" else f"Idle RSS, sum of {n} nodes"
        a(f"| {what} | {r['config']} | {r['client']} | {lb} | {kf} | {rfmt(r['ratio'])} | {pairs_text(r['ratios'])} |")
    a("")
    a(f"Cluster resources (sums over the {n} broker processes; lower is better):")
    a("")
    a("| cluster | logbroker | Kafka | ratio | per-pair ratios |")
    a("| --- | ---: | ---: | ---: | --- |")
    for r in resource_rows(res):
        if r["lb"] is None and r["kafka"] is None:
            continue
        what = r["what"].replace(
            "Peak RSS under load (max over all produce/consume/latency runs)",
            "Peak RSS under load, sum of the nodes (max over all runs)",
        )
        a(
            f"| {what} | {fmt(r['lb'], r['unit'])} | {fmt(r['kafka'], r['unit'])} | {rfmt(r['ratio'])} | "
            f"{pairs_text(r['ratios'])} |"
        )
    a("")
    a(
        "Where the two cores went (median over runs; cores = CPU seconds / wall seconds; broker = the three "
        "nodes together, client = the load generators):"
    )
    a("")
    a("| runs | broker cores, logbroker | client cores, vs logbroker | broker cores, Kafka | client cores, vs Kafka |")
    a("| --- | ---: | ---: | ---: | ---: |")
    for r in core_rows(res):
        a(f"| {r['what']} | {r['lb_b']:.2f} | {r['lb_c']:.2f} | {r['kf_b']:.2f} | {r['kf_c']:.2f} |")
    a("")
    a(_isr_line(res, rf))
    a("")
    fmts = [
        s["extra"].get("format_s")
        for s in res["samples"]
        if s["metric"] == "coldstart" and s["broker"] == "kafka" and s["extra"].get("format_s")
    ]
    if fmts:
        a(
            f"Kafka's storage format of the {n} nodes before each start took {med(fmts):.2f} s in all (median, not "
            "counted above)."
        )
        a("")
    if images:
        a("### Plots")
        a("")
        for k, p in images.items():
            a(f"![{k}]({_rel(p, docs_path.parent)})")
            a("")
    if CLUSTER_ANALYSIS.exists():
        a(CLUSTER_ANALYSIS.read_text().rstrip("\n"))
        a("")
    return "\n".join(L) + "\n"


def _isr_line(res: dict, rf: int) -> str:
    parts = []
    for b in ("logbroker", "kafka"):
        runs = [s for s in res["samples"] if s["broker"] == b and s["value"] is not None and "isr_min" in s["extra"]]
        short = [s for s in runs if s["extra"]["isr_min"] < rf]
        parts.append(
            f"{b}: {len(runs) - len(short)} of {len(runs)} runs"
            + (
                f" ({len(short)} ended with a follower out of the ISR: "
                + "; ".join(
                    f"{s['metric']} {s['config']} pair {s['pair'] + 1}, ISR {s['extra']['isr_min']}" for s in short
                )
                + ")"
                if short
                else ""
            )
        )
    return f"ISR right after each run, full ({rf} replicas): " + "; ".join(parts) + "."

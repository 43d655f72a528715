"""Side-by-side benchmark: logbroker against a real Apache Kafka broker on this machine.

    python -m benches.compare            # full run (3 A/B pairs, ~15 min): writes docs/benchmarks.md + docs/img/
    python -m benches.compare --quick    # smoke run (~3 min): writes benches/.results/quick/ only
    python -m benches.compare --cluster  # 3 nodes against 3 nodes, replication factor 3, acks=all (~25 min)
    python -m benches.compare --cluster --quick
    python -m benches.compare --report benches/.results/<run>/results.json   # redo docs from saved results

Needs Java 17+ and Maven on PATH (Kafka comes from Maven Central on first use, cached in
~/.cache/logbroker-bench/) and the Python packages in benches/requirements.txt.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "benches" / "requirements.txt"
NEEDED = {"confluent_kafka": "confluent-kafka", "tqdm": "tqdm", "matplotlib": "matplotlib", "logbroker": "logbroker"}


def _missing() -> list[str]:
    return [pkg for mod, pkg in NEEDED.items() if importlib.util.find_spec(mod) is None]


def _machine() -> str:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return (
        f"{os.cpu_count()} cores ({model or platform.machine()}), {mem:.0f} GiB, Linux {platform.release()}, "
        f"Python {platform.python_version()}, {java[0] if java else 'java ?'}"
    )


def _git_rev() -> str:
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO)
    return r.stdout.strip() or "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 pair, small volumes (~3 min)")
    ap.add_argument(
        "--cluster",
        action="store_true",
        help="three nodes against three nodes: replication factor 3, acks=all (benches/compare/cluster.py)",
    )
    ap.add_argument("--pairs", type=int, help="A/B pairs per workload (default 3, quick 1)")
    ap.add_argument("--out", type=Path, help="results directory (default benches/.results/<stamp> or quick)")
    ap.add_argument(
        "--docs",
        type=Path,
        help="markdown file to update between the side-by-side markers "
        "(default docs/benchmarks.md; with --quick: <out>/benchmarks.md)",
    )
    ap.add_argument("--img-dir", type=Path, help="where the PNGs go (default docs/img; with --quick: <out>/img)")
    ap.add_argument("--data-root", type=Path, help="parent of the brokers' temp data dirs (default: $TMPDIR)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--no-profile", action="store_true", help="skip the py-spy profile of logbroker")
    ap.add_argument("--report", type=Path, metavar="RESULTS_JSON", help="only rebuild docs and plots from results")
    ap.add_argument("--install-deps", action="store_true", help="pip install -r benches/requirements.txt first")
    args = ap.parse_args(argv)

    if args.install_deps:
        subprocess.run([sys.executable, "-m", "pip", "install", "-r", str(REQUIREMENTS)], check=True)
    missing = _missing()
    if missing:
        print(
            f"missing Python packages: {', '.join(missing)}\n"
            f"install them with:  {sys.executable} -m pip install -r {REQUIREMENTS.relative_to(REPO)}"
            + ("\n(and logbroker itself: pip install .)" if "logbroker" in missing else "")
            + "\nor rerun with --install-deps",
            file=sys.stderr,
        )
        return 2
    if not args.report:
        for tool in ("java", "mvn"):
            if shutil.which(tool) is None:
                print(f"{tool} not found on PATH: the Kafka peer needs Java 17+ and Maven", file=sys.stderr)
                return 2

    from benches.compare import cluster_report, report

    quick, cluster = args.quick, args.cluster
    if args.report:
        res = report.load(args.report)
        out = args.report.parent
        name = res["meta"]["profile"]["name"]
        quick, cluster = name.endswith("quick"), name.startswith("cluster")
    else:
        from benches.compare.run import FULL, QUICK, Comparison

        if cluster:
            from benches.compare.cluster import CLUSTER_FULL, CLUSTER_QUICK, ClusterComparison

            prof, cls = (CLUSTER_QUICK if quick else CLUSTER_FULL), ClusterComparison
        else:
            prof, cls = (QUICK if quick else FULL), Comparison
        if args.pairs:
            prof.pairs = args.pairs
        if args.no_profile:
            prof.profile = False
        stem = "cluster-" if cluster else ""
        out = args.out or (
            REPO / "benches" / ".results" / (f"{stem}quick" if quick else stem + time.strftime("%Y%m%d-%H%M%S"))
        )
        if out.exists() and quick:
            shutil.rmtree(out)
        cmp = cls(prof, out, args.data_root)
        cmp.meta["machine"] = _machine()
        cmp.meta["logbroker_git"] = _git_rev()
        cmp.run(progress=not args.no_progress)
        res = report.load(cmp.save())

    docs = args.docs or ((out / "benchmarks.md") if quick else REPO / "docs" / "benchmarks.md")
    img = args.img_dir or ((out / "img") if quick else REPO / "docs" / "img")
    images = report.plots(res, img, prefix="cluster" if cluster else "side-by-side")
    cmd = "python -m benches.compare" + (" --cluster" if cluster else "") + (" --quick" if quick else "")
    if cluster:
        section = cluster_report.markdown(res, images, docs, cmd)
        report.write_docs(docs, section, cluster_report.START, cluster_report.END)
    else:
        section = report.markdown(res, images, docs, cmd)
        report.write_docs(docs, section)
    (out / "section.md").write_text(section)
    print(f"\nresults: {out / 'results.json'}\ndocs:    {docs}\nplots:   {', '.join(str(p) for p in images.values())}")
    print()
    print(
        "\n".join(
            ln
            for ln in section.splitlines()
            if ln.startswith("| ") and "|" in ln[2:] and ("x |" in ln or "n/a" in ln or "%" in ln)
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

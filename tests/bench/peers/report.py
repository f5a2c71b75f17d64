#!/usr/bin/env python3
"""report.py OUT - the table and the ratios of a run-peers.sh run.

Reads OUT/SYSTEM/JOB.json (fio --output-format=json) and OUT/SYSTEM/flush.txt
written by tests/vm/guest/t-bench.sh. Prints a markdown table (IOPS,
bandwidth, p50/p99/p99.9 latency per system and job; for randrw70 IOPS and
bandwidth are reads + writes and the latencies are those of the reads), a
table of write-back times, and one `name: value` line per ratio:
pmcache_vs_PEER_JOB = pmcache IOPS / PEER IOPS (for flush: pmcache write-back
rate / PEER write-back rate), all from the same guest run. Also writes
OUT/iops.dat and OUT/latency.dat for plot.sh.
"""
import json
import os
import sys

SYSTEMS = ["pmcache", "dmwritecache", "bcache", "rawnvme"]
JOBS = ["randwrite_qd1", "randwrite_qd32", "randread_warm", "randrw70", "seqwrite_1m"]
HEADLINE = [
    "pmcache_vs_dmwritecache_randwrite_qd32",
    "pmcache_vs_dmwritecache_randread_warm",
    "pmcache_vs_bcache_randread_warm",
    "pmcache_vs_rawnvme_randwrite_qd32",
]


def pct(side, p):
    for key in ("lat_ns", "clat_ns"):
        perc = side.get(key, {}).get("percentile")
        if perc:
            for k, v in perc.items():
                if abs(float(k) - p) < 1e-6:
                    return v / 1000.0
    return None


def load(out, system, job):
    path = os.path.join(out, system, job + ".json")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    # fio may print notes before the JSON
    text = text[text.find("{"):]
    j = json.loads(text)["jobs"][0]
    r, w = j["read"], j["write"]
    main = r if job.startswith("randread") or job == "randrw70" else w
    return {
        "iops": r["iops"] + w["iops"],
        "mibs": (r["bw_bytes"] + w["bw_bytes"]) / 2**20,
        "p50": pct(main, 50.0),
        "p99": pct(main, 99.0),
        "p999": pct(main, 99.9),
    }


def load_flush(out, system):
    try:
        with open(os.path.join(out, system, "flush.txt")) as f:
            kv = dict(x.split("=", 1) for x in f.read().split())
        mib, s = float(kv["flush_mib"]), float(kv["flush_s"])
        return {"mib": mib, "s": s, "mibs": mib / s if s > 0 else float("inf")}
    except (OSError, KeyError, ValueError):
        return None


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    out = sys.argv[1]
    res = {(s, j): load(out, s, j) for s in SYSTEMS for j in JOBS}
    fl = {s: load_flush(out, s) for s in SYSTEMS}
    env = os.path.join(out, "env.txt")
    if os.path.exists(env):
        for line in open(env):
            print("# " + line.rstrip())
    print()
    print("| system | job | IOPS | MiB/s | p50 us | p99 us | p99.9 us |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for j in JOBS:
        for s in SYSTEMS:
            x = res[(s, j)]
            if x is None:
                print(f"| {s} | {j} | - | - | - | - | - |")
                continue
            print(f"| {s} | {j} | {x['iops']:.0f} | {x['mibs']:.1f} | {fmt(x['p50'])} |"
                  f" {fmt(x['p99'])} | {fmt(x['p999'])} |")
    print()
    print("| system | write-back of | seconds | MiB/s |")
    print("|---|---:|---:|---:|")
    for s in SYSTEMS:
        f = fl[s]
        if f:
            print(f"| {s} | {f['mib']:.0f} MiB | {f['s']:.2f} | {f['mibs']:.1f} |")
        elif s != "rawnvme":
            print(f"| {s} | - | - | - |")
    print()
    ratios = {}
    for peer in SYSTEMS[1:]:
        for j in JOBS:
            a, b = res[("pmcache", j)], res[(peer, j)]
            if a and b and b["iops"] > 0:
                ratios[f"pmcache_vs_{peer}_{j}"] = a["iops"] / b["iops"]
        a, b = fl["pmcache"], fl[peer]
        if a and b and b["mibs"] > 0:
            ratios[f"pmcache_vs_{peer}_flush"] = a["mibs"] / b["mibs"]
    for name in HEADLINE + sorted(k for k in ratios if k not in HEADLINE):
        if name in ratios:
            print(f"{name}: {ratios[name]:.2f}")
        else:
            print(f"{name}: missing")
    # data files for plot.sh: one row per job, one column per system
    with open(os.path.join(out, "iops.dat"), "w") as f:
        f.write("job " + " ".join(SYSTEMS) + "\n")
        for j in JOBS:
            f.write(j + " " + " ".join(
                fmt(res[(s, j)] and res[(s, j)]["iops"], 0).replace("-", "NaN") for s in SYSTEMS) + "\n")
    with open(os.path.join(out, "latency.dat"), "w") as f:
        f.write("job " + " ".join(f"{s}_p50 {s}_p99" for s in SYSTEMS) + "\n")
        for j in JOBS:
            cols = []
            for s in SYSTEMS:
                x = res[(s, j)]
                cols += [fmt(x and x["p50"]), fmt(x and x["p99"])]
            f.write(j + " " + " ".join(c.replace("-", "NaN") for c in cols) + "\n")


if __name__ == "__main__":
    main()

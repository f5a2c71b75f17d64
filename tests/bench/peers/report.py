#!/usr/bin/env python3
"""report.py OUT - the tables, the ratios and the goals of a run-peers.sh run.

Reads what tests/vm/guest/t-bench.sh wrote: OUT/SYSTEM/JOB.json (fio
--output-format=json), OUT/SYSTEM/flush.txt, and for the replay job
OUT/SYSTEM/replay.txt (seconds per pass), replay_passN.json and
replay_countersN.txt and replay_diskN.txt (the system's hit counters and the
disks' block-layer counters before the replay and after each pass). Prints:
- a markdown table of IOPS, bandwidth and p50/p99/p99.9 latency per system
  and job (for randrw70 IOPS and bandwidth are reads + writes and the
  latencies are the reads'; the _2j jobs sum both jobs);
- a table of write-back times;
- a table of the replay: seconds and read hit ratio per pass and system,
  and one of what reached the disk in each pass (I/Os, MiB and mean
  latency in the block layer, for reads, writes and flushes), and one of
  where the CPU time went in each pass (replay_cpuP_start.txt and
  replay_cpuP.txt: the guest's busy share, the ublk server's threads);
- one `name: value` line per figure: pmcache_vs_PEER_JOB = pmcache IOPS /
  PEER IOPS (for flush: write-back MiB/s over the peer's), all from the same
  guest run, ublkceiling (the RAM-backed ublk target) and ublkloop (the
  same target forwarding every request to the disk) among the peers;
  replay_passN_s_SYSTEM, replay_read_hit_pct_SYSTEM (both passes),
  replay_passN_vs_dmwritecache_SYSTEM and replay_passN_vs_ublkloop_SYSTEM
  (time over dm-writecache's, over the loop's);
- the paired runs (pmcache, the ceiling and dm-writecache live side by
  side, each round running a job once on each, OUT/SYSTEM/paired_JOB_R.json):
  every round's IOPS and ratios, and pmcache_vs_PEER_JOB_paired, the
  median of the rounds' ratios;
- the paired replay (pmcache, dm-writecache and the raw disk on thirds of
  the disk, each round replaying the trace twice on each from new caches,
  OUT/SYSTEM/preplay.txt): every round's pass times and ratios, and
  replay_passN_vs_dmwritecache_pmcache_paired,
  replay_passN_pmcache_over_rawnvme_paired and
  replay_pass2_over_pass1_pmcache_paired, the medians of the rounds';
- the goals of the hit-path issue with the measured value beside each
  (those of the delayed disk only for a run with --disk-delay-ms; those of
  the paired runs beside the others where the run had them).
Also writes OUT/iops.dat, OUT/latency.dat and OUT/replay.dat for plot.sh.
"""
import json
import os
import re
import statistics
import sys

SYSTEMS = ["pmcache", "ublkceiling", "ublkloop", "dmwritecache", "bcache", "rawnvme"]
# the ceiling replays too: every request a hit in RAM behind the ublk
# transport, the floor of any ublk cache's time on the trace; and the loop
# (every request forwarded to the disk through the same transport): what
# any ublk server in front of the disk pays before it caches anything
REPLAY_SYSTEMS = ["pmcache", "ublkceiling", "ublkloop", "dmwritecache", "bcache", "rawnvme"]
JOBS = ["randwrite_qd1", "randwrite_qd32", "randwrite_qd32_2j", "randread_warm",
        "randread_warm_2j", "randrw70", "seqwrite_1m"]
HEADLINE = [
    "pmcache_vs_ublkceiling_randread_warm",
    "pmcache_vs_ublkceiling_randwrite_qd32",
    "pmcache_vs_ublkceiling_randwrite_qd1",
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


def fio_json(path):
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    # fio may print notes before the JSON
    text = text[text.find("{"):]
    try:
        return json.loads(text)["jobs"][0]
    except (ValueError, KeyError, IndexError):
        return None


def load(out, system, job):
    j = fio_json(os.path.join(out, system, job + ".json"))
    if j is None:
        return None
    r, w = j["read"], j["write"]
    main = r if "randread" in job or job == "randrw70" else w
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


def find_key(o, key):
    """the first dict under o (depth first) that has key"""
    if isinstance(o, dict):
        if key in o:
            return o
        for v in o.values():
            r = find_key(v, key)
            if r is not None:
                return r
    elif isinstance(o, list):
        for v in o:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def counters(out, system, n):
    """the hit counters after pass n (0: before the replay) as a dict"""
    try:
        with open(os.path.join(out, system, f"replay_counters{n}.txt")) as f:
            text = f.read()
    except OSError:
        return None
    if system == "pmcache":
        try:
            j = json.loads(text[text.find("{"):])
        except ValueError:
            return None
        t = find_key(j, "total")
        t = t["total"] if t else find_key(j, "read_hit_blocks")
        if not t:
            return None
        return {k: t.get(k, 0) for k in ("read_hit_blocks", "read_miss_blocks", "bypass_blocks",
                                         "write_pmem_blocks", "write_disk_blocks", "evictions",
                                         "wb_blocks", "nospace_waits")}
    if system == "dmwritecache":
        # 0 SECTORS writecache ERR BLOCKS FREE WRITEBACK READS READ_HITS WRITES ...
        f = text.split()
        if len(f) < 9 or f[2] != "writecache":
            return None
        return {"reads": int(f[7]), "read_hits": int(f[8]),
                "writes": int(f[9]) if len(f) > 9 else 0}
    if system == "bcache":
        kv = dict(re.findall(r"(\w+)=(\d+)", text))
        return {k: int(v) for k, v in kv.items()}
    return None


def hit_pct(system, a, b):
    """read hit percentage between counter snapshots a and b"""
    if a is None or b is None:
        return None
    d = {k: b.get(k, 0) - a.get(k, 0) for k in b}
    if system == "pmcache":
        hit, tot = d["read_hit_blocks"], d["read_hit_blocks"] + d["read_miss_blocks"]
    elif system == "dmwritecache":
        hit, tot = d["read_hits"], d["reads"]
    elif system == "bcache":
        hit = d.get("cache_hits", 0)
        tot = hit + d.get("cache_misses", 0)
    else:
        return None
    return 100.0 * hit / tot if tot > 0 else None


def load_replay(out, system):
    try:
        with open(os.path.join(out, system, "replay.txt")) as f:
            passes = dict(re.findall(r"pass=(\d+) s=([0-9.]+)", f.read()))
    except OSError:
        return None
    c = [counters(out, system, n) for n in range(3)]
    res = {}
    for p in (1, 2):
        s = passes.get(str(p))
        if s is None:
            continue
        j = fio_json(os.path.join(out, system, f"replay_pass{p}.json"))
        res[p] = {
            "s": float(s),
            "hit": hit_pct(system, c[p - 1], c[p]),
            "read_mib": j and j["read"]["io_bytes"] / 2**20,
            "write_mib": j and j["write"]["io_bytes"] / 2**20,
            "delta": ({k: c[p][k] - c[p - 1].get(k, 0) for k in c[p]}
                      if c[p] and c[p - 1] else None),
        }
    return res


def disk_traffic(out, system, p):
    """what reached each disk in replay pass p, from the block layer's
    counters before and after it: {dev: (reads, read MiB, read ms mean,
    writes, write MiB, write ms mean, flushes, flush ms mean)}"""
    snap = []
    for n in (p - 1, p):
        try:
            with open(os.path.join(out, system, f"replay_disk{n}.txt")) as f:
                snap.append({l.split()[0]: [int(v) for v in l.split()[1:]]
                             for l in f if len(l.split()) >= 12})
        except (OSError, ValueError):
            return None
    res = {}
    for dev, b in snap[1].items():
        a = snap[0].get(dev)
        if a is None:
            continue
        d = [y - x for x, y in zip(a, b)]
        # /sys/block/DEV/stat: reads, merges, sectors, ms; writes, merges,
        # sectors, ms; in flight, io ms, queue ms; discards (4); flushes, ms
        fl, flms = (d[15], d[16]) if len(d) >= 17 else (0, 0)
        res[dev] = (d[0], d[2] / 2048, d[3] / d[0] if d[0] else 0.0,
                    d[4], d[6] / 2048, d[7] / d[4] if d[4] else 0.0,
                    fl, flms / fl if fl else 0.0)
    return res


def cpu_use(out, system, p):
    """where the guest's CPU time went in replay pass p, from the snapshots
    taken at its start and end (replay_cpuP_start.txt, replay_cpuP.txt):
    (guest busy % of both vCPUs' time, the ublk server's CPU seconds or
    None, {thread name: CPU seconds} of the threads alive at both ends,
    threads of one name summed, and "io_uring workers": the rest of the
    server's total, the workers that came and went in the pass, and the
    CPU seconds of dm-delay's polling thread or None)"""
    snap = []
    for name in (f"replay_cpu{p}_start.txt", f"replay_cpu{p}.txt"):
        try:
            with open(os.path.join(out, system, name)) as f:
                snap.append([l.split() for l in f if l.strip()])
        except OSError:
            return None
    hz = 100.0  # USER_HZ of /proc/stat and /proc/PID/stat on x86 Linux
    cpu = [next((l for l in sn if l[0] == "cpu"), None) for sn in snap]
    if None in cpu:
        return None
    d = [int(b) - int(a) for a, b in zip(cpu[0][1:], cpu[1][1:])]
    total = sum(d[:8])  # user nice system idle iowait irq softirq steal
    busy = 100.0 * (total - d[3] - d[4]) / total if total else 0.0
    proc = [next((l for l in sn if l[0] == "proc"), None) for sn in snap]
    server = None
    if None not in proc:
        server = (int(proc[1][1]) + int(proc[1][2]) - int(proc[0][1]) - int(proc[0][2])) / hz
    groups = {}
    th = [{} for _ in snap]
    for i, sn in enumerate(snap):
        for l in sn:
            # io_uring's workers come and go: counted below, from the total
            if l[0] == "thread" and len(l) == 4 and not l[1].startswith("iou-"):
                th[i][l[1]] = th[i].get(l[1], 0) + int(l[2]) + int(l[3])
    for g, v in th[1].items():
        if g in th[0]:
            groups[g] = (v - th[0][g]) / hz
    if server is not None:
        groups["io_uring workers"] = max(0.0, server - sum(groups.values()))
    kt = [{l[1]: int(l[2]) + int(l[3]) for l in sn if l[0] == "kthread" and len(l) == 4}
          for sn in snap]
    delay = sum(v - kt[0][k] for k, v in kt[1].items() if k in kt[0]) / hz if kt[1] else None
    return busy, server, groups, delay


def cpu_table(out, rp):
    """the table of where each replay pass's CPU time went (cpu_use)"""
    rows = []
    for s in REPLAY_SYSTEMS:
        for p, x in sorted((rp[s] or {}).items()):
            c = cpu_use(out, s, p)
            if c:
                rows.append((s, p, x["s"]) + c)
    if not rows:
        return
    # dm-delay's polling thread, where the run has one (--delay-dev dm-delay)
    dd = any(r[-1] is not None for r in rows)
    print("| system | replay | guest CPUs busy % | ublk server CPU, % of one vCPU |"
          " its threads, % of one vCPU |" + (" dm-delay's thread, % of one vCPU |" if dd else ""))
    print("|---|---|---:|---:|---|" + ("---:|" if dd else ""))
    for s, p, secs, busy, server, groups, delay in rows:
        th = ", ".join(f"{g} {100 * v / secs:.0f}" for g, v in
                       sorted(groups.items(), key=lambda kv: -kv[1]) if v > 0)
        srv = "-" if server is None else f"{100 * server / secs:.0f}"
        col = ""
        if dd:
            col = " - |" if delay is None else f" {100 * delay / secs:.0f} |"
        print(f"| {s} | pass {p} | {busy:.0f} | {srv} | {th or '-'} |{col}")
    print()


def delay_ms(out):
    """the run's --disk-delay-ms, from env.txt"""
    try:
        m = re.search(r"disk_delay_ms=(\d+)", open(os.path.join(out, "env.txt")).read())
        return int(m.group(1)) if m else 0
    except OSError:
        return 0


PAIRED_JOBS = ["randread_warm", "randwrite_qd32", "randwrite_qd1"]
PAIRED_PEERS = ["ublkceiling", "dmwritecache"]


def load_paired(out):
    """{job: [{system: iops}, ...] per round} of the paired runs"""
    runs = {}
    for j in PAIRED_JOBS:
        r = 1
        while True:
            row = {}
            for s in ["pmcache"] + PAIRED_PEERS:
                x = load(out, s, f"paired_{j}_{r}")
                if x:
                    row[s] = x["iops"]
            if not row:
                break
            runs.setdefault(j, []).append(row)
            r += 1
    return runs


PREPLAY_SYSTEMS = ["pmcache", "dmwritecache", "rawnvme"]


def load_preplay(out):
    """[{system: {pass: seconds}}, ...] per round of the paired replay"""
    rounds = {}
    for s in PREPLAY_SYSTEMS:
        try:
            with open(os.path.join(out, s, "preplay.txt")) as f:
                text = f.read()
        except OSError:
            continue
        for r, p, sec in re.findall(r"round=(\d+) pass=(\d+) s=([0-9.]+)", text):
            rounds.setdefault(int(r), {}).setdefault(s, {})[int(p)] = float(sec)
    return [rounds[r] for r in sorted(rounds)]


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    out = sys.argv[1]
    res = {(s, j): load(out, s, j) for s in SYSTEMS for j in JOBS}
    fl = {s: load_flush(out, s) for s in SYSTEMS}
    rp = {s: load_replay(out, s) for s in REPLAY_SYSTEMS}
    for name in ("env.txt", "trace.txt", "host-load.txt"):
        path = os.path.join(out, name)
        if os.path.exists(path):
            for line in open(path):
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
        elif s not in ("rawnvme", "ublkceiling", "ublkloop"):
            print(f"| {s} | - | - | - |")
    print()
    print("| system | replay | seconds | read hit % | read MiB | write MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for s in REPLAY_SYSTEMS:
        for p in (1, 2):
            x = (rp[s] or {}).get(p)
            if x is None:
                print(f"| {s} | pass {p} | - | - | - | - |")
                continue
            print(f"| {s} | pass {p} | {x['s']:.2f} | {fmt(x['hit'])} | {fmt(x['read_mib'], 0)} |"
                  f" {fmt(x['write_mib'], 0)} |")
    print()
    print("| system | replay | disk | reads | read MiB | read ms | writes | write MiB"
          " | write ms | flushes | flush ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in REPLAY_SYSTEMS:
        for p in (1, 2):
            for dev, t in sorted((disk_traffic(out, s, p) or {}).items()):
                print(f"| {s} | pass {p} | {dev} | {t[0]} | {t[1]:.0f} | {t[2]:.2f} | {t[3]} |"
                      f" {t[4]:.0f} | {t[5]:.2f} | {t[6]} | {t[7]:.2f} |")
    print()
    cpu_table(out, rp)
    x = rp.get("pmcache") or {}
    for p in (1, 2):
        d = x.get(p) and x[p]["delta"]
        if d:
            print(f"# pmcache replay pass {p}: " + ", ".join(f"{k} {v}" for k, v in d.items()))
    print()

    fig = {}
    for peer in SYSTEMS[1:]:
        for j in JOBS:
            a, b = res[("pmcache", j)], res[(peer, j)]
            if a and b and b["iops"] > 0:
                fig[f"pmcache_vs_{peer}_{j}"] = a["iops"] / b["iops"]
        a, b = fl["pmcache"], fl[peer]
        if a and b and b["mibs"] > 0:
            fig[f"pmcache_vs_{peer}_flush"] = a["mibs"] / b["mibs"]
    # the peers' own ratios to the ceiling, to read pmcache's beside them
    for peer in ("ublkloop", "dmwritecache", "bcache", "rawnvme"):
        for j in JOBS:
            a, b = res[(peer, j)], res[("ublkceiling", j)]
            if a and b and b["iops"] > 0:
                fig[f"{peer}_vs_ublkceiling_{j}"] = a["iops"] / b["iops"]
    for s in REPLAY_SYSTEMS:
        for p in (1, 2):
            x = (rp[s] or {}).get(p)
            if x:
                fig[f"replay_pass{p}_s_{s}"] = x["s"]
                if x["hit"] is not None:
                    fig[f"replay_pass{p}_read_hit_pct_{s}"] = x["hit"]
                for base in ("dmwritecache", "ublkloop"):
                    ref = (rp[base] or {}).get(p)
                    if s != base and ref and ref["s"] > 0:
                        fig[f"replay_pass{p}_vs_{base}_{s}"] = x["s"] / ref["s"]
        a, b = counters(out, s, 0), counters(out, s, 2)
        h = hit_pct(s, a, b)
        if h is not None:
            fig[f"replay_read_hit_pct_{s}"] = h
    paired = load_paired(out)
    if paired:
        print("paired runs (IOPS per round; ratio = pmcache over the peer; figure = median ratio):")
        print()
        print("| job | round | " + " | ".join(["pmcache"] + PAIRED_PEERS) + " | "
              + " | ".join(f"vs {p}" for p in PAIRED_PEERS) + " |")
        print("|---|---:|" + "---:|" * (1 + 2 * len(PAIRED_PEERS)))
        for j, rounds in paired.items():
            ratios = {p: [] for p in PAIRED_PEERS}
            for i, row in enumerate(rounds, 1):
                cells = [fmt(row.get(s), 0) for s in ["pmcache"] + PAIRED_PEERS]
                for p in PAIRED_PEERS:
                    if row.get("pmcache") and row.get(p):
                        ratios[p].append(row["pmcache"] / row[p])
                        cells.append(f"{ratios[p][-1]:.2f}")
                    else:
                        cells.append("-")
                print(f"| {j} | {i} | " + " | ".join(cells) + " |")
            for p in PAIRED_PEERS:
                if ratios[p]:
                    fig[f"pmcache_vs_{p}_{j}_paired"] = statistics.median(ratios[p])
        print()
    preplay = load_preplay(out)
    if preplay:
        print("paired replay (seconds per pass and round; ratio = pmcache over the peer;"
              " figure = median ratio):")
        print()
        print("| round | pass | " + " | ".join(PREPLAY_SYSTEMS)
              + " | vs dmwritecache | over rawnvme | pmcache pass 2 / pass 1 |")
        print("|---:|---:|" + "---:|" * (len(PREPLAY_SYSTEMS) + 3))
        ratios = {}
        for i, row in enumerate(preplay, 1):
            pm = row.get("pmcache", {})
            for p in (1, 2):
                cells = [fmt(row.get(s, {}).get(p), 2) for s in PREPLAY_SYSTEMS]
                for name, peer in (("vs_dmwritecache_pmcache", "dmwritecache"),
                                   ("pmcache_over_rawnvme", "rawnvme")):
                    a, b = pm.get(p), row.get(peer, {}).get(p)
                    if a and b:
                        ratios.setdefault(f"replay_pass{p}_{name}_paired", []).append(a / b)
                        cells.append(f"{a / b:.2f}")
                    else:
                        cells.append("-")
                if p == 2 and pm.get(1) and pm.get(2):
                    ratios.setdefault("replay_pass2_over_pass1_pmcache_paired", []).append(
                        pm[2] / pm[1])
                    cells.append(f"{pm[2] / pm[1]:.2f}")
                else:
                    cells.append("")
                print(f"| {i} | {p} | " + " | ".join(cells) + " |")
        print()
        for k, v in ratios.items():
            fig[k] = statistics.median(v)
    order = HEADLINE + sorted(k for k in fig if k not in HEADLINE)
    for name in order:
        if name in fig:
            print(f"{name}: {fig[name]:.2f}")
        elif name in HEADLINE:
            print(f"{name}: missing")
    print()

    # the goals of the hit-path issue, measured in this run
    def goal(name, value, op, target):
        if value is None:
            print(f"goal {name} {op} {target}: not measured in this run")
            return
        met = value >= target if op == ">=" else value <= target
        # three decimals where two would hide which side of the goal it is
        nd = 3 if f"{value:.2f}" == f"{target:.2f}" else 2
        print(f"goal {name} {op} {target}: {value:.{nd}f} {'met' if met else 'NOT met'}")

    for sfx in ("", "_paired"):
        if sfx and not paired:
            continue
        for j in ("randread_warm", "randwrite_qd32", "randwrite_qd1"):
            goal(f"pmcache_vs_ublkceiling_{j}{sfx}", fig.get(f"pmcache_vs_ublkceiling_{j}{sfx}"),
                 ">=", 0.9)
        for j in ("randread_warm", "randwrite_qd32"):
            goal(f"pmcache_vs_dmwritecache_{j}{sfx}", fig.get(f"pmcache_vs_dmwritecache_{j}{sfx}"),
                 ">=", 1.0)
    goal("pmcache_vs_rawnvme_seqwrite_1m", fig.get("pmcache_vs_rawnvme_seqwrite_1m"), ">=", 0.9)
    for p in (1, 2):
        goal(f"replay_pass{p}_vs_dmwritecache_pmcache",
             fig.get(f"replay_pass{p}_vs_dmwritecache_pmcache"), "<=", 1.0)
    p1, p2 = fig.get("replay_pass1_s_pmcache"), fig.get("replay_pass2_s_pmcache")
    goal("replay_pass2_over_pass1_pmcache", p2 / p1 if p1 and p2 else None, "<=", 1.0)
    if preplay:
        for p in (1, 2):
            goal(f"replay_pass{p}_vs_dmwritecache_pmcache_paired",
                 fig.get(f"replay_pass{p}_vs_dmwritecache_pmcache_paired"), "<=", 1.0)
        goal("replay_pass2_over_pass1_pmcache_paired",
             fig.get("replay_pass2_over_pass1_pmcache_paired"), "<=", 1.0)
        if delay_ms(out) > 0:
            for p in (1, 2):
                goal(f"replay_pass{p}_pmcache_over_rawnvme_paired",
                     fig.get(f"replay_pass{p}_pmcache_over_rawnvme_paired"), "<=", 1.0)
    # with the delayed disk every cache ahead of the raw disk
    if delay_ms(out) > 0:
        raw = [fig.get(f"replay_pass{p}_s_rawnvme") for p in (1, 2)]
        for s in ("pmcache", "dmwritecache", "bcache"):
            for p in (1, 2):
                t = fig.get(f"replay_pass{p}_s_{s}")
                goal(f"replay_pass{p}_{s}_over_rawnvme", t / raw[p - 1] if t and raw[p - 1] else None,
                     "<=", 1.0)

    # data files for plot.sh: one row per job, one column per system that
    # ran (gnuplot refuses a column without a value)
    ran = [s for s in SYSTEMS if any(res[(s, j)] for j in JOBS)]
    rran = [s for s in REPLAY_SYSTEMS if rp[s]]
    with open(os.path.join(out, "iops.dat"), "w") as f:
        f.write("job " + " ".join(ran) + "\n")
        for j in JOBS:
            f.write(j + " " + " ".join(
                fmt(res[(s, j)] and res[(s, j)]["iops"], 0).replace("-", "NaN") for s in ran) + "\n")
    with open(os.path.join(out, "latency.dat"), "w") as f:
        f.write("job " + " ".join(f"{s}_p50 {s}_p99" for s in ran) + "\n")
        for j in JOBS:
            cols = []
            for s in ran:
                x = res[(s, j)]
                cols += [fmt(x and x["p50"]), fmt(x and x["p99"])]
            f.write(j + " " + " ".join(c.replace("-", "NaN") for c in cols) + "\n")
    with open(os.path.join(out, "replay.dat"), "w") as f:
        f.write("pass " + " ".join(rran) + "\n")
        for p in (1, 2):
            f.write(f"pass{p} " + " ".join(
                fmt((rp[s] or {}).get(p) and rp[s][p]["s"], 2).replace("-", "NaN")
                for s in rran) + "\n")


if __name__ == "__main__":
    main()

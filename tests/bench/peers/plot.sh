#!/bin/bash
# plot.sh OUT - gnuplot PNGs of a run-peers.sh run: OUT/iops.png (IOPS per
# job and system), OUT/latency.png (p50 and p99 latency per job and
# system) and OUT/replay.png (seconds per replay pass and system), from
# OUT/iops.dat, OUT/latency.dat and OUT/replay.dat written by report.py.
set -euo pipefail
OUT=$1
# columns of the data files: job + one per system (latency: two per system)
NI=$(head -n 1 "$OUT/iops.dat" | wc -w)
NL=$(head -n 1 "$OUT/latency.dat" | wc -w)
NR=$(head -n 1 "$OUT/replay.dat" | wc -w)
common='
set terminal pngcairo size 1050,420 font "sans,10"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top
set grid ytics
set logscale y
set xtics noenhanced
set key noenhanced
'
# a --replay-only run has no fio job: only the replay plot
if [ "$NI" -gt 1 ]; then
gnuplot <<GP
$common
set output "$OUT/iops.png"
set title "IOPS per job (4K jobs; seqwrite is 1 MiB per I/O; _2j: two jobs), log scale - same TCG guest run"
set ylabel "IOPS"
plot for [c=2:$NI] "$OUT/iops.dat" using c:xtic(1) title columnhead
GP
gnuplot <<GP
$common
set terminal pngcairo size 1050,700 font "sans,10"
set output "$OUT/latency.png"
set ylabel "microseconds"
set multiplot layout 2,1
set title "p50 latency per job (randrw70: reads), log scale"
plot for [c=2:$NL:2] "$OUT/latency.dat" using c:xtic(1) title columnhead
set title "p99 latency per job (randrw70: reads), log scale"
plot for [c=3:$NL:2] "$OUT/latency.dat" using c:xtic(1) title columnhead
unset multiplot
GP
fi
gnuplot <<GP
$common
unset logscale y
set terminal pngcairo size 700,420 font "sans,10"
set output "$OUT/replay.png"
set title "replay job: seconds per pass (lower is better) - same TCG guest run"
set ylabel "seconds"
set yrange [0:*]
plot for [c=2:$NR] "$OUT/replay.dat" using c:xtic(1) title columnhead
GP

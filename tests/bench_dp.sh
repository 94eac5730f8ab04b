#!/bin/sh
# tests/bench_dp.sh - `make bench`: wall-clock throughput of this machine's
# cores under data parallelism and under many virtual GPUs. The same global
# batch (24 sequences, the default model) is trained, alternating, several
# rounds, on: 1 rank (dp 1), 2 ranks (dp 2), 12 ranks as tp 2 x pp 3 x dp 2
# (as it runs, without DP overlap, with its ranks left to the operating
# system instead of one DP replica a core (--pin-ranks off), with the
# system's time slice instead of the 20 ms each rank asks for on shared
# cores (TT_SLICE_MS=0), with every wait polling instead of the doorbells
# (TT_NO_DOORBELL=1), and with one micro-batch instead of
# four: a pipeline nobody would run on real GPUs, whose bubble costs nothing
# on shared cores; it separates what micro-batching costs here, smaller
# products and more calls, from what the extra ranks cost), 12 ranks as
# dp 12, and the two halves of the 12-rank layout apart: pp 3 x dp 2 on 6
# ranks (the pipeline alone: its hand-overs and its extra ranks) and
# tp 2 x dp 2 on 4 (tensor parallelism alone: it repeats the LayerNorms and
# the residual adds on both TP ranks, packs each column-parallel layer's
# input twice, and sums activations four times a block). Each run's figure
# is the median wall time of its steps (first steps dropped, the CSV's
# wall_ms column); each layout's figure is the median over rounds. The
# ratios are throughputs relative to dp 2 on 2 ranks: what oversubscribing
# the cores with waiting ranks costs. Each is the median over rounds of the
# round's own ratio (dp 2's step over the layout's, run seconds apart), so
# a machine whose speed drifts between rounds moves both sides of a ratio.
# Beside them, what all of a run's ranks used of the cores per step (the
# run's own "cores" line, getrusage over its steps after the first): CPU in
# user code and in the kernel, context switches, and the cores left idle
# (what the step's wall time offered less what the ranks used): where the
# cores went when the throughput falls short, the layout's own work or the
# waiting. Last, the layout's ceiling: the throughput it would have if its
# user CPU alone filled the cores, which better waiting can beat only by the
# user CPU that waiting spends (MPI's progress loops spin in user code).
# Each layout's line also gives the lowest and highest of its rounds'
# ratios: on a machine whose speed moves between runs (a shared or virtual
# one), that spread, not the median's last digit, says how far one run's
# figure can be trusted. More rounds narrow the median's own uncertainty:
# BENCH_ROUNDS=N (default 5).
# Usage: bench_dp.sh TT_BIN [ROUNDS]
set -u
bin=$1
rounds=${2:-${BENCH_ROUNDS:-5}}
case $rounds in '' | *[!0-9]* | 0) echo "bench_dp.sh: BENCH_ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
. "$(dirname "$0")/launcher.sh"
launch=$TT_MPIRUN
export OPENBLAS_NUM_THREADS=1
cfg="--steps 12 --batch 24 --quiet --sample-len 0 --eval-every 0 --no-spot-check"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of the wall_ms column (9) of a log, steps >= 2
step_ms() { awk -F, 'NR > 3 { print $9 }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# name: ranks: an environment setting for every rank (- for none;
# TT_NO_DOORBELL=1: every wait polls, as before the doorbells of
# doc/communication.md; TT_SLICE_MS=0: the system's time slice): the layout
# flags
layouts="dp1:1:-:--dp 1
dp2:2:-:--dp 2
tp2pp3dp2:12:-:--tp 2 --pp 3 --dp 2
tp2pp3dp2-noovl:12:-:--tp 2 --pp 3 --dp 2 --no-overlap
tp2pp3dp2-nopin:12:-:--tp 2 --pp 3 --dp 2 --pin-ranks off
tp2pp3dp2-slice0:12:TT_SLICE_MS=0:--tp 2 --pp 3 --dp 2
tp2pp3dp2-poll:12:TT_NO_DOORBELL=1:--tp 2 --pp 3 --dp 2
tp2pp3dp2-m1:12:-:--tp 2 --pp 3 --dp 2 --micro-batches 1
dp12:12:-:--dp 12 --micro-batches 2
pp3dp2:6:-:--pp 3 --dp 2
tp2dp2:4:-:--tp 2 --dp 2"

# The cores every layout gets: the first BENCH_CORES (default 2) of those
# this shell may use, so a laptop with 8 cores measures what the 2-core
# target means (12 ranks on 8 cores against dp 2 on 2 would compare
# machines, not layouts); BENCH_CORES=all for all of them. The ranks
# inherit the set, and --pin-ranks auto divides it (src/comm/cores.c reads
# each rank's allowed CPUs).
want=${BENCH_CORES:-2}
have=$(nproc)
cores=$have
[ "$want" = all ] && want=$have
case $want in '' | *[!0-9]* | 0) echo "bench_dp.sh: BENCH_CORES must be a positive number or all, not '$want'" >&2; exit 2 ;; esac
if [ "$cores" -gt "$want" ]; then
    command -v taskset >/dev/null 2>&1 || { echo "bench_dp.sh: taskset (util-linux) is needed to use $want of the $have cores" >&2; exit 2; }
    # this shell's CPUs, ranges expanded ("0-3,6" -> 0 1 2 3 6), the first $want
    cpus=$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
        awk -F- '{ if (NF == 2) for (i = $1; i <= $2; i++) print i; else print $1 }' |
        head -n "$want" | paste -sd, -)
    launch="taskset -c $cpus $launch"
    cores=$want
    echo "(on CPU$([ "$want" -gt 1 ] && echo s) $cpus of the $have this shell may use; BENCH_CORES=all for all)"
elif [ "$cores" -lt "$want" ]; then
    echo "(BENCH_CORES=$want, but this shell may use $have: all of them)"
fi
[ "$cores" = 1 ] && cw="1 core" || cw="$cores cores"
echo "wall-clock throughput: default model, global batch 24, $cw, one BLAS thread per rank, $rounds rounds"
echo "(a layout's throughput: the median of its rounds' ratios, dp2's step over its own in the same round)"
r=1
while [ "$r" -le "$rounds" ]; do
    line="round $r:"
    echo "$layouts" | while IFS=: read -r name np setting flags; do
        envs="" pass=""
        [ "$setting" != - ] && envs=$setting pass="-x ${setting%%=*}"
        env $envs $launch $pass -np "$np" "$bin" $cfg $flags \
            --log "$tmp/$name.csv" </dev/null >"$tmp/out" || exit 1
        # "cores (wall clock), ...: CPU U ms user + K ms kernel; S context switches (...)"
        sed -n 's/^cores (wall clock).*: CPU \([0-9.]*\) ms user + \([0-9.]*\) ms kernel; \([0-9]*\) context.*/\1 \2 \3/p' \
            "$tmp/out" > "$tmp/use"
        read -r u k sw < "$tmp/use" || exit 1
        echo "$u" >> "$tmp/$name.user"
        echo "$k" >> "$tmp/$name.kernel"
        echo "$sw" >> "$tmp/$name.switches"
        ms=$(step_ms "$tmp/$name.csv")
        echo "$ms" >> "$tmp/$name.all"
        printf '%s %s %s ms/step' "$line" "$name" "$ms"
        line=","
    done || exit 1
    echo
    r=$((r + 1))
done
base=$(median < "$tmp/dp2.all")
echo "$layouts" | while IFS=: read -r name np setting flags; do
    m=$(median < "$tmp/$name.all")
    paste "$tmp/dp2.all" "$tmp/$name.all" | awk '{ print $1 / $2 }' > "$tmp/$name.ratios"
    ratio=$(median < "$tmp/$name.ratios")
    lo=$(sort -g "$tmp/$name.ratios" | head -n 1)
    hi=$(sort -g "$tmp/$name.ratios" | tail -n 1)
    u=$(median < "$tmp/$name.user")
    k=$(median < "$tmp/$name.kernel")
    sw=$(median < "$tmp/$name.switches")
    awk -v n="$name" -v np="$np" -v m="$m" -v r="$ratio" -v lo="$lo" -v hi="$hi" -v u="$u" -v k="$k" -v sw="$sw" \
        'BEGIN { printf "median %-16s on %2d ranks: %6.1f ms/step wall, throughput %.2f of dp2 on 2 ranks (rounds %.2f to %.2f); a step used %.1f ms user + %.1f ms kernel CPU, %d context switches\n", n, np, m, r, lo, hi, u, k, sw }'
    # cores left idle: what the step's wall time offered (ranks up to the
    # cores) less what its ranks used; with the kernel's share, what waiting
    # cost, as opposed to the layout's own work (its user CPU). The ceiling:
    # the throughput if its user CPU filled the cores with nothing idle and
    # nothing in the kernel, the most a better way of waiting could give
    # unless the waits themselves spin in user code.
    awk -v np="$np" -v c="$cores" -v m="$m" -v u="$u" -v k="$k" -v b="$base" \
        'BEGIN { n = np < c ? np : c; idle = 1 - (u + k) / (n * m); if (idle < 0) idle = 0;
                 printf "       %16s cores unused by its ranks %.1f%%, in the kernel %.1f%% of the step; its user CPU alone on %d core%s: %.2f of dp2\n", "", 100 * idle, 100 * k / (n * m), n, (n > 1 ? "s" : ""), b / (u / n) }'
done

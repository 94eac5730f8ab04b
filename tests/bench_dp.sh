#!/bin/sh
# tests/bench_dp.sh - `make bench`: the data-parallel speed-up on this machine.
# The same global batch is trained on 1 rank (dp 1) and on 2 ranks (dp 2),
# alternating, several rounds; each round's figure is the median step time
# of its run (first steps dropped), and the speed-up is the ratio of the
# medians over rounds. Usage: bench_dp.sh TT_BIN [ROUNDS]
set -u
bin=$1
rounds=${2:-3}
launch="${MPIRUN:-mpirun} -q --oversubscribe"
[ "$(id -u)" = 0 ] && launch="$launch --allow-run-as-root"
export OPENBLAS_NUM_THREADS=1
cfg="--steps 12 --batch 16 --quiet --sample-len 0 --eval-every 0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median of the ms column (5) of a log, steps >= 2
step_ms() { awk -F, 'NR > 3 { print $5 }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "DP speed-up: default model, global batch 16, $(nproc) cores, one BLAS thread per rank"
: > "$tmp/one"
: > "$tmp/two"
r=1
while [ "$r" -le "$rounds" ]; do
    $launch -np 1 "$bin" $cfg --dp 1 --log "$tmp/1.csv" >/dev/null || exit 1
    $launch -np 2 "$bin" $cfg --dp 2 --log "$tmp/2.csv" >/dev/null || exit 1
    a=$(step_ms "$tmp/1.csv")
    b=$(step_ms "$tmp/2.csv")
    echo "$a" >> "$tmp/one"
    echo "$b" >> "$tmp/two"
    echo "round $r: dp 1 $a ms/step, dp 2 $b ms/step"
    r=$((r + 1))
done
a=$(median < "$tmp/one")
b=$(median < "$tmp/two")
awk -v a="$a" -v b="$b" 'BEGIN { printf "median: dp 1 %.1f ms/step, dp 2 %.1f ms/step: speed-up %.2fx\n", a, b, a / b }'

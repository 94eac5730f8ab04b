#!/bin/sh
# tests/bench_single.sh - `make bench`, first part: one virtual GPU against the
# sgemm rate of its own shapes and against PyTorch eager on the same model.
# Each round runs one round of bench_train (sgemm on the model's shapes, then
# three training steps, then the attention's products through our kernel and
# through cblas_sgemm) and then three steps of bench_torch.py, so both see
# the same machine load; the figures are medians over all rounds' steps, wall
# clock. PyTorch is skipped with a note when python3 cannot import torch.
# PyTorch runs twice a round: as installed, and with glibc's malloc told to
# keep freed memory (its default hands large blocks back to the kernel, and
# PyTorch's eager allocator then page-faults them in again every step, which
# made its steps vary from 255 to 540 ms on our 2-core machine); ours
# allocates everything before the first step, so it is unaffected.
# The ratio to PyTorch is given two ways: the ratio of the two medians over
# all rounds, and the median of each round's own ratio (its torch steps'
# median over its own steps', run seconds apart), which cancels the
# machine's drift between rounds, as bench_dp.sh's ratios do.
# Usage: bench_single.sh BENCH_TRAIN BENCH_TORCH_PY [ROUNDS]
set -u
train=$1
torch_py=$2
rounds=${3:-${BENCH_ROUNDS:-5}}
case $rounds in "" | *[!0-9]* | 0) echo "bench_single.sh: BENCH_ROUNDS must be a positive number, not '$rounds'" >&2; exit 2 ;; esac
export OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# The interpreter that has torch: the first python3 on PATH, else Debian's.
py=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' 2>/dev/null; then py=$p; break; fi
done

# The machine, since figures from two kinds of CPU are not comparable: its
# model name and widest vector extension (OpenBLAS's kernel follows below).
isa=$(sed -n 's/^flags[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1 |
      awk '{ for (i = 1; i <= NF; i++) f[$i] = 1 } END { print f["avx512f"] ? "AVX-512" : f["avx2"] ? "AVX2" : "no AVX2" }')
echo "machine: $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1), $(getconf _NPROCESSORS_ONLN) cores online, $isa"
"$train" 0 | sed -n '1,2p' | sed "s/, 0 rounds,/, $rounds rounds (alternating with PyTorch),/" # the config and the FLOPs per step
[ -n "$py" ] && echo "PyTorch $("$py" -c 'import torch; print(torch.__version__)') eager, one thread, same model (tests/bench_torch.py)"
# torch_steps FILE: a bench_torch.py run's step times, one a line
torch_steps() { sed 's/torch step: \([0-9.]*\) ms wall.*/\1/' "$1"; }
r=1
while [ "$r" -le "$rounds" ]; do
    "$train" 1 > "$tmp/ours" || exit 1
    line=$(grep '^round 1:' "$tmp/ours")
    echo "$line" | sed 's/.*sgemm \([0-9.]*\) GFLOP.*/\1/' >> "$tmp/gemm"
    echo "$line" | sed 's/.*steps //; s/ ms$//' | tr ' ' '\n' > "$tmp/round_ours"
    cat "$tmp/round_ours" >> "$tmp/ours_ms"
    # the attention's products through small_gemm and through cblas_sgemm
    grep '^attention 1:' "$tmp/ours" | sed 's/.*small_gemm \([0-9.]*\) ms, cblas_sgemm \([0-9.]*\) ms.*/\1 \2/' >> "$tmp/att"
    printf 'round %d: ours %s' "$r" "$(echo "$line" | sed 's/^round 1: //')"
    if [ -n "$py" ]; then
        "$py" "$torch_py" 1 3 > "$tmp/torch" || exit 1
        MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000 \
            "$py" "$torch_py" 1 3 > "$tmp/torch2" || exit 1
        torch_steps "$tmp/torch" > "$tmp/round_torch"
        torch_steps "$tmp/torch2" > "$tmp/round_torch2"
        cat "$tmp/round_torch" >> "$tmp/torch_ms"
        cat "$tmp/round_torch2" >> "$tmp/torch2_ms"
        # this round's own ratios: the median of its torch steps over ours
        awk -v o="$(median < "$tmp/round_ours")" -v t="$(median < "$tmp/round_torch")" \
            -v t2="$(median < "$tmp/round_torch2")" 'BEGIN { print t / o, t2 / o }' >> "$tmp/ratios"
        printf '; torch steps %s ms, kept malloc %s ms' "$(paste -sd' ' "$tmp/round_torch")" \
            "$(paste -sd' ' "$tmp/round_torch2")"
    fi
    echo
    r=$((r + 1))
done
flop=$("$train" 0 | sed -n 's/^model FLOPs per step: \([0-9.]*\) GFLOP.*/\1/p')
tokens=$("$train" 0 | sed -n '1s/.* T=\([0-9]*\) B=\([0-9]*\),.*/\1 \2/p' | awk '{ print $1 * $2 }')
g=$(median < "$tmp/gemm")
o=$(median < "$tmp/ours_ms")
awk -v g="$g" -v o="$o" -v f="$flop" -v n="$tokens" 'BEGIN {
    printf "ours:  %.1f ms/step (median, wall), %.0f tokens/s, %.1f GFLOP/s = %.1f%% of the sgemm rate on the model shapes (%.1f GFLOP/s)\n", o, n / (o / 1e3), f / (o / 1e3), 100 * f / (o / 1e3) / g, g }'
a1=$(cut -d' ' -f1 "$tmp/att" | median)
a2=$(cut -d' ' -f2 "$tmp/att" | median)
awk -v a="$a1" -v b="$a2" 'BEGIN {
    printf "attention products (one step, the model shapes, fastest of 3 alternated each round, median): small_gemm %.2f ms, cblas_sgemm %.2f ms: %.2fx\n", a, b, b / a }'
if [ -n "$py" ]; then
    t=$(median < "$tmp/torch_ms")
    t2=$(median < "$tmp/torch2_ms")
    q=$(cut -d' ' -f1 "$tmp/ratios" | median)
    q2=$(cut -d' ' -f2 "$tmp/ratios" | median)
    awk -v o="$o" -v t="$t" -v t2="$t2" -v q="$q" -v q2="$q2" -v n="$tokens" 'BEGIN {
        printf "torch: %.1f ms/step (median, wall), %.0f tokens/s; ours / torch throughput: %.2fx (the median of the rounds\047 own ratios: %.2fx)\n", t, n / (t / 1e3), t / o, q
        printf "torch with glibc malloc keeping freed memory: %.1f ms/step, %.0f tokens/s; ours / torch: %.2fx (rounds: %.2fx)\n", t2, n / (t2 / 1e3), t2 / o, q2 }'
else
    echo "torch: skipped (python3 cannot import torch; Debian: apt-get install python3-torch)"
fi

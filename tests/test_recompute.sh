#!/bin/sh
# tests/test_recompute.sh - activation recomputation (doc/design.md section 10):
# --recompute selective and full give checkpoints bit-identical to none (the
# same kernels on the same inputs), pass --validate, keep the TP traffic equal
# to its formula (full repeats each block's forward all-reduces), and save
# exactly the activation memory worked out by hand.
. "$TT_SRCDIR/testlib.sh"

small="--layers 4 --steps 2 --sample-len 0 --eval-every 0 --quiet"

# gpu0 of tp 2 x pp 2 (default model C 96, NH 12, T 64; batch 24 in 4
# micro-batches of 6): 2 blocks, and 1f1b holds 2 micro-batches on stage 0, so
# 4 (block, micro-batch) activation sets. N = 6 x 64 = 384 rows; local widths
# Cl = 48, Hl = 192, 6 heads. A set keeps x_in, ln1, x_mid, ln2 (4 N C),
# 4 means/rstds (4 N), q, k, v, atty (4 N Cl), att (6 x 6 x 64 x 64), fc1 and
# gelu (2 N Hl): 517632 floats. Selective drops att from all 4 and keeps one
# shared: saves 3 x 147456 floats; full keeps only x_in (36864 floats) and one
# shared set of the rest: saves 3 x (517632 - 36864) floats.
sel_saved=$((3 * 147456 * 4))
full_saved=$((3 * (517632 - 36864) * 4))

act() { awk '$1 == "gpu0(dp0,pp0,tp0)" && $2 !~ /%$/ && NF >= 8 { print $3 }' "$1"; }
for r in none selective full; do
    tt 4 $small --tp 2 --pp 2 --recompute $r --validate --report memory --save "$work/$r.st"
    cp "$work/out" "$work/$r.out"
    if [ "$status" -eq 0 ] && grep -q "validation PASSED" "$work/out" &&
       grep -q "TP/PP/DP traffic equals its formula: yes" "$work/out"; then
        ok "tp2 pp2 --recompute $r: --validate passes, traffic equals its formula"
    else
        not_ok "tp2 pp2 --recompute $r (exit $status)"
    fi
done
for r in selective full; do
    cmp -s "$work/none.st" "$work/$r.st" && ok "--recompute $r: checkpoint bit-identical to none" \
        || not_ok "--recompute $r: checkpoint differs from none"
done
# The account is in MiB with 3 decimals: compare to 0.001 MiB.
check_saved() {
    got=$(awk -v a="$(act "$work/none.out")" -v b="$(act "$work/$1.out")" 'BEGIN { printf "%.3f", a - b }')
    want=$(awk -v s="$2" 'BEGIN { printf "%.3f", s / 1048576 }')
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; exit !(d < 0.0015 && d > -0.0015) }'; then
        ok "--recompute $1 saves $got MiB of activations on gpu0, by hand $want"
    else
        not_ok "--recompute $1 saves $got MiB on gpu0, by hand $want"
    fi
}
check_saved selective "$sel_saved"
check_saved full "$full_saved"

# Full recompute with --tp-mlp gather (the gather is repeated too), with
# interleaving and ZeRO on dp 2: bit-identical to none, validated.
for extra in "--tp 2 --tp-mlp gather" "--pp 2 --dp 2 --schedule interleaved --zero 1"; do
    rm -f "$work/a.st"
    tt 4 $small $extra --recompute none --save "$work/a.st"
    s_none=$status
    tt 4 $small $extra --recompute full --validate --save "$work/b.st"
    if [ "$s_none$status" = 00 ] && grep -q "validation PASSED" "$work/out" &&
       grep -q "traffic equals its formula: yes" "$work/out" && cmp -s "$work/a.st" "$work/b.st"; then
        ok "$extra --recompute full: validated, traffic formula, same checkpoint as none"
    else
        not_ok "$extra --recompute full (exit $status)"
    fi
done

# A planted fault: block 0's backward skips its recomputation and reads what
# block 1 left in the shared activations; the oracle must name a wrong
# gradient (exit 1), for selective and for full.
for r in selective full; do
    tt 1 $small --recompute $r --validate --inject-bug stale-recompute
    if [ "$status" -eq 1 ] && grep -q "^validation FAILED: gradient of blocks\.0\." "$work/out"; then
        ok "planted stale-recompute with --recompute $r: the oracle fails the run"
    else
        not_ok "planted stale-recompute with --recompute $r not caught (exit $status)"
    fi
done

tt 1 --recompute partial --steps 1
[ "$status" -eq 2 ] && grep -q "none|selective|full\|none, selective" "$work/err" \
    && ok "--recompute partial refused" || not_ok "--recompute partial: exit $status"
finish

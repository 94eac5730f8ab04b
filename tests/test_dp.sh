#!/bin/sh
# tests/test_dp.sh - data parallelism against the unsharded oracle: dp = 1, 2,
# 3, 4 with 1, 2 and 4 micro-batches each pass --validate over several steps
# (loss and every gradient each step; weights and Adam moments at the end), the
# DP replicas end bit-identical, and the DP all-reduce traffic is exactly one
# gradient buffer per step, in the announced number of buckets.
. "$TT_SRCDIR/testlib.sh"

# batch 48 splits evenly for every dp and micro-batch count below.
cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 48 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0"

for dp in 1 2 3 4; do
    for mb in 1 2 4; do
        tt "$dp" $cfg --dp "$dp" --micro-batches "$mb" --validate --dp-bucket 64K
        what="dp $dp, $mb micro-batch(es)"
        if [ "$status" -ne 0 ]; then
            not_ok "$what: exit $status"
            continue
        fi
        grep -q "validation PASSED" "$work/out" || { not_ok "$what: validation did not pass"; continue; }
        if [ "$dp" -gt 1 ] && ! grep -q "DP replicas bit-identical (weights and Adam moments): yes" "$work/out"; then
            not_ok "$what: replicas differ"
            continue
        fi
        # (one GPU moves nothing and prints no traffic line)
        if [ "$dp" -gt 1 ] && ! grep -q "^every GPU's TP/PP/DP traffic equals its formula: yes" "$work/out"; then
            not_ok "$what: traffic differs from its formula"
            continue
        fi
        ok "$what: validation passed, worst relative error $(worst_error)$([ "$dp" -gt 1 ] && echo ", traffic as its formula")"
    done
done

# The DP traffic of a run: the parameter count P of this config is
# tok_emb 256*32 + pos_emb 16*32 + 2 blocks * (12*32*32 + 13*32) + ln_f 2*32 +
# lm_head 256*32 = 8192 + 512 + 2*(12288 + 416) + 64 + 8192 = 42368 floats.
# Per step the DP group all-reduces all of them once: 169472 bytes, in
# ceil(42368*4 / 65536) = 3 buckets of at most 64K.
tt 2 $cfg --dp 2 --dp-bucket 64K
row=$(awk '$1 == "DP" && $2 == "all-reduce" { print $3, $4, $5, $6 }' "$work/out")
if [ "$status" -eq 0 ] && [ "$row" = "12 12 677888 677888" ] &&
    grep -q "every GPU's TP/PP/DP traffic equals its formula: yes" "$work/out" &&
    grep -q "^DP gradient sync: 42368 floats (165.5 KiB) summed per step in 3 all-reduce buckets of up to 65536 bytes$" "$work/out"; then
    ok "DP counters exact: 12 all-reduce calls, 677888 bytes in 3 announced buckets, as the formula says"
else
    not_ok "DP counters: '$row'"
fi
# The same run's bookkeeping inside the training steps is the loss and the
# clipping norm's sum of squares, one all-reduce of two doubles (16 bytes)
# per step: 4 calls, 64 bytes over 4 steps. The spot check of the last step
# (no --validate here) compares weights and moments with broadcasts of 4P
# bytes each; those are the oracle's, not training's, and must not land in
# this row.
if grep -qx "    other (loss, clipping norm): 4 calls, 64 bytes" "$work/out"; then
    ok "other row: the loss and the clipping norm only (4 calls, 64 bytes)"
else
    not_ok "other row: '$(grep "other (loss" "$work/out")'"
fi
finish

#!/bin/sh
# tests/test_oracle_faults.sh - the oracle must FAIL on a planted bug: each
# fault of --inject-bug, on a layout where it bites, makes a --validate run
# exit 1 on every rank with "validation FAILED" naming the quantity the bug
# spoils first and a GPU; the same run without the fault passes, so the
# difference is the bug. Also: --inject-bug list names these four faults
# (test_bugs.sh runs every line of the list), and an
# unknown name is a usage error of one line.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 2 --dim 24 --heads 6 --seq 16 --batch 8 --micro-batches 2 --steps 2 --validate --quiet --sample-len 0 --eval-every 0 --eval-windows 4"
gpu_re='gpu[0-9][0-9]*(dp[0-9][0-9]*,pp[0-9][0-9]*,tp[0-9][0-9]*)'

# passes NP ARGS...: the run without a fault passes the oracle.
passes() {
    np=$1
    shift
    tt "$np" $cfg "$@"
    if [ "$status" -eq 0 ] && grep -q "^validation PASSED" "$work/out"; then
        ok "no fault, $*: validation passed (worst relative error $(worst_error))"
    else
        not_ok "no fault, $*: exit $status, expected a pass"
    fi
}

# catches BUG WHAT GPU NP ARGS...: with --inject-bug BUG every rank exits 1,
# the verdict is "validation FAILED: WHAT diverges first, ... worst on GPU"
# and stderr says it once, in one line
# (GPU a fixed string, or "any" for any GPU name).
catches() {
    bug=$1 what=$2 gpu=$3 np=$4
    shift 4
    tt_each "$np" $cfg "$@" --inject-bug "$bug"
    statuses=$(rank_statuses)
    [ "$gpu" = any ] && gpu_pat=$gpu_re || gpu_pat=$gpu
    line=$(grep "^validation FAILED" "$work/out")
    if [ "$statuses" != "${np}x1" ]; then
        not_ok "$bug ($*): rank exit statuses $statuses, expected ${np}x1"
    elif ! printf '%s\n' "$line" | grep -q "^validation FAILED: $what diverges first, at step 0, worst on $gpu_pat "; then
        not_ok "$bug ($*): expected '$what' and $gpu in: $line"
    elif [ "$(grep -c '^tiny_transformer: ' "$work/err")" -ne 1 ] ||
        ! grep -q "^tiny_transformer: validation FAILED: the sharded run does not match the unsharded one (the validation table says where)$" "$work/err"; then
        # (stderr had nothing: a script reading the errors alone saw none)
        not_ok "$bug ($*): stderr is not the one line of the verdict: $(grep '^tiny_transformer' "$work/err")"
    else
        ok "$bug ($*): ${line#validation FAILED: }"
    fi
}

# Three TP ranks: V = 256 is padded to 258, so every TP fault bites.
passes 3 --tp 3
catches grad-shard "gradient of blocks.0.attn.q.weight" "gpu2(dp0,pp0,tp2)" 3 --tp 3
# The loss still matches; the first gradient computed after the missing
# all-reduce is the last block's ln1 (its bias comes first in backward order).
catches drop-tp-allreduce "gradient of blocks.1.ln1.bias" any 3 --tp 3
# The padding is on the last TP rank: the loss is off, and that GPU's slice
# (its padding rows of lm_head get a gradient) is the furthest off.
catches no-vocab-mask "loss" "gpu2(dp0,pp0,tp2)" 3 --tp 3
# Two DP replicas, each keeping its own half of the gradient: the first
# gradient the oracle meets (nearest the loss) is lm_head's.
passes 2 --dp 2
catches dp-no-sync "gradient of lm_head.weight" any 2 --dp 2

# A false alarm the oracle once raised on a correct run: one step, where a
# gradient of blocks.5.mlp.fc2.bias near Adam's eps (-1.27e-8) sums 0.4%
# differently over 6 micro-batches than over 1, and Adam's first step
# lr g / (|g| + eps) passes that on to the bias (3e-4 of it, against the
# weights' 1e-4). Such elements are left out of the weights' error and
# counted (doc/validation.md); everything else still passes.
tt 1 --layers 8 --dim 12 --heads 6 --seq 16 --batch 24 --micro-batches 6 --clip 0.05 --steps 1 \
    --validate --sample-len 0 --quiet --eval-every 0
if [ "$status" -eq 0 ] && grep -q "^validation PASSED" "$work/out" &&
    grep -q "^  weights: [1-9][0-9]* of 21432 elements ([0-9.]*%) left out, whose last Adam step the rounding of a near-zero gradient decides (sqrt(v-hat) under 10 eps); their gradients and moments are compared$" "$work/out"; then
    ok "one step near Adam's eps: passes, $(grep -o '[0-9]* of [0-9]* elements ([0-9.]*%) left out' "$work/out")"
else
    not_ok "one step near Adam's eps (exit $status): $(grep -E '^validation|left out' "$work/out")"
fi

# The table, and a name that is not in it.
tt 1 --inject-bug list
missing=""
for bug in grad-shard drop-tp-allreduce no-vocab-mask dp-no-sync; do
    grep -q "^  $bug " "$work/out" || missing="$missing $bug"
done
if [ "$status" -eq 0 ] && [ -z "$missing" ]; then
    ok "--inject-bug list: exit 0, lists these four faults"
else
    not_ok "--inject-bug list: exit $status, missing:$missing"
fi
expect_error "--inject-bug nonsense" 2 "unknown --inject-bug 'nonsense' (one of: grad-shard, drop-tp-allreduce, no-vocab-mask, dp-no-sync" 2 --inject-bug nonsense
finish

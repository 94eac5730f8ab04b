#!/bin/sh
# tests/test_bugs.sh - the bug table as printed: every command that
# `--inject-bug list` prints is run here, parsed from that output, so the list
# and the test cannot drift apart. With its bug the run must fail on every
# rank (exit 1) with the verdict naming the quantity this test expects; the
# same command without `--inject-bug NAME` must pass (so the difference is
# the bug, not the layout). The expected quantities are this file's own,
# each with the reason it comes first; the list must say the same.
. "$TT_SRCDIR/testlib.sh"

# expected NAME: what the failure names first, and why.
expected() {
    case $1 in
        # Scaled after the backward: only that gradient is off.
        grad-shard) echo "gradient of blocks.0.attn.q.weight" ;;
        # The missing all-reduce is the last thing the backward of the last
        # block does; its ln1 (bias first in backward order) reads its output.
        drop-tp-allreduce) echo "gradient of blocks.1.ln1.bias" ;;
        # The softmax over 258 columns instead of 256: the loss itself.
        no-vocab-mask) echo "loss" ;;
        # lm_head's gradient is the first the oracle meets (nearest the loss),
        # and every gradient is one replica's half.
        dp-no-sync) echo "gradient of lm_head.weight" ;;
        # A hang has no divergence: the watchdog speaks.
        stall) echo "watchdog" ;;
        # fc2.bias's gradient is the sum of the gradient flowing in (right);
        # fc2.weight's multiplies it by the stale recomputed activation.
        stale-recompute) echo "gradient of blocks.0.mlp.fc2.weight" ;;
        # Every gradient is M = 2 times too large: the first met is lm_head's.
        grad-accum) echo "gradient of lm_head.weight" ;;
        # The gradients are right; only their norm counts some twice.
        norm-replicated) echo "gradient norm" ;;
        # The last stage computes its loss on the wrong micro-batch's input.
        stale-activation) echo "loss" ;;
        # LayerNorm gradients are each TP rank's own tokens' sums; ln_f's bias
        # is the first LayerNorm gradient the oracle meets (nearest the loss).
        sp-no-ln-allreduce) echo "gradient of ln_f.bias" ;;
        # The bucket holding lm_head is summed without the last micro-batch's
        # share: lm_head's gradient is the first the oracle meets.
        early-bucket) echo "gradient of lm_head.weight" ;;
        # The last block is backwarded first; its fc2 gradients need only
        # what flows in and the kept activations (right), but the gradient
        # flowing on into fc1 goes through fc2's weights, read from the
        # wrong unit: fc1's bias is the first gradient it reaches.
        stale-gather) echo "gradient of blocks.1.mlp.fc1.bias" ;;
        # Not the oracle's: one NaN makes the all-reduced clipping norm NaN
        # on every rank, and the run's own check of each step stops there.
        nan-grad) echo "the gradient norm became nan at step 0" ;;
        # Every gradient is right; only the weights after the last step (1)
        # differ, where the oracle compares them.
        lost-update) echo "weights of blocks.0.mlp.fc1.weight" ;;
        # Step 0 starts from zeroed buffers and is right; step 1's backward
        # adds to step 0's summed gradient: lm_head's, the first the oracle
        # meets (nearest the loss), is off at step 1.
        no-zero-grad) echo "gradient of lm_head.weight" ;;
        *) echo "" ;;
    esac
}
known="grad-shard drop-tp-allreduce no-vocab-mask dp-no-sync stall stale-recompute grad-accum norm-replicated stale-activation sp-no-ln-allreduce early-bucket stale-gather nan-grad lost-update no-zero-grad"

tt 1 --inject-bug list
cp "$work/out" "$work/list"
listed=$(sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p' "$work/list" | tr '\n' ' ')
nrun=$(grep -c '^    run:     mpirun --oversubscribe -np [0-9]* \./tiny_transformer .* --inject-bug [a-z-]*$' "$work/list")
missing=""
for b in $known; do
    case " $listed " in *" $b "*) ;; *) missing="$missing $b" ;; esac
done
if [ "$status" -eq 0 ] && [ -z "$missing" ] && [ "$nrun" -eq "$(echo $listed | wc -w)" ]; then
    ok "--inject-bug list: $(echo $listed | wc -w) bugs, each with one command: $listed"
else
    not_ok "--inject-bug list: exit $status, missing:$missing; $nrun run lines for: $listed"
fi

# One record per bug: NAME<TAB>SHOWS<TAB>COMMAND (what follows `mpirun --oversubscribe`).
awk '/^  [a-z][a-z-]*  / { name = $1 }
     /^    shows:   / { sub(/^    shows:   /, ""); shows = $0 }
     /^    run:     mpirun --oversubscribe / { sub(/^    run:     mpirun --oversubscribe /, ""); printf "%s\t%s\t%s\n", name, shows, $0 }' \
    "$work/list" > "$work/records"

# The records come in on fd 3: mpirun would read the loop's stdin.
while IFS='	' read -r bug shows cmd <&3; do
    want=$(expected "$bug")
    if [ -z "$want" ]; then
        not_ok "$bug: listed, but this test does not know what it should break"
        continue
    fi
    # -np N ./tiny_transformer ARGS... --inject-bug NAME
    set -- $cmd
    np=$2
    shift 3
    args=$(echo "$*" | sed 's/ --inject-bug [a-z-]*$//')
    if [ "$bug" = stall ]; then
        verdict="tiny_transformer: watchdog: ..."
        tt_each "$np" $args --inject-bug "$bug"
        got=$(grep "^tiny_transformer: watchdog: " "$work/err" | head -n 1)
        statuses=$(rank_statuses)
        if [ "$shows" != "$verdict" ]; then
            not_ok "$bug: the list says '$shows', expected '$verdict'"
        elif [ "$statuses" != "${np}x1" ] || [ -z "$got" ]; then
            not_ok "$bug ($args): rank exit statuses $statuses (want ${np}x1), watchdog report '$got'"
        else
            ok "$bug: $got"
        fi
        tt "$np" $args
        if [ "$status" -eq 0 ] && ! grep -q "watchdog" "$work/err"; then
            ok "$bug: the same command without the bug: exit 0, no report"
        else
            not_ok "$bug: the same command without the bug: exit $status"
        fi
        continue
    fi
    if [ "$bug" = nan-grad ]; then
        # The guard stops every rank after step 0, before its --save-every
        # save could keep the NaN weights: the checkpoint named must not
        # appear (in this test's directory: the list names it in the
        # current one).
        verdict="tiny_transformer: $want ..."
        args=$(echo "$args" | sed "s| --save nan-grad.ckpt| --save $work/nan-grad.ckpt|")
        tt_each "$np" $args --inject-bug "$bug"
        got=$(grep "^tiny_transformer: " "$work/err" | grep -v "^tiny_transformer: [0-9]* virtual GPUs" | head -n 1)
        if [ "$shows" != "$verdict" ]; then
            not_ok "$bug: the list says '$shows', expected '$verdict'"
        elif [ "$(rank_statuses)" != "${np}x1" ] || [ -e "$work/nan-grad.ckpt" ]; then
            not_ok "$bug ($args): rank exit statuses $(rank_statuses), expected ${np}x1; checkpoint: $(ls "$work/nan-grad.ckpt" 2>&1)"
        elif [ "$got" != "tiny_transformer: $want (some gradient is inf or NaN; try a lower --lr)" ]; then
            not_ok "$bug: expected '$want', got '$got'"
        else
            ok "$bug: every rank exit 1, no checkpoint written: ${got#tiny_transformer: }"
        fi
        tt_each "$np" $args
        if [ "$(rank_statuses)" = "${np}x0" ] && [ -s "$work/nan-grad.ckpt" ]; then
            ok "$bug: the same command without the bug: exit 0, its checkpoint written"
        else
            not_ok "$bug: the same command without the bug: rank exit statuses $(rank_statuses)"
        fi
        continue
    fi
    # the step it shows in: the first, but the weights' after the last (1),
    # and no-zero-grad's second (step 0 starts from zeroed buffers)
    at=0
    case $bug in lost-update|no-zero-grad) at=1 ;; esac
    verdict="validation FAILED: $want diverges first, at step $at, ..."
    tt_each "$np" $args --inject-bug "$bug"
    line=$(grep "^validation FAILED" "$work/out")
    if [ "$shows" != "$verdict" ]; then
        not_ok "$bug: the list says '$shows', expected '$verdict'"
    elif [ "$(rank_statuses)" != "${np}x1" ]; then
        not_ok "$bug ($args): rank exit statuses $(rank_statuses), expected ${np}x1"
    elif ! printf '%s\n' "$line" | grep -q "^validation FAILED: $want diverges first, at step $at, worst on gpu[0-9]*(dp[0-9]*,pp[0-9]*,tp[0-9]*) (relative error [0-9.e+-]* there, tolerance [0-9.e+-]*; the table gives each tensor's worst step)$"; then
        not_ok "$bug: expected '$want' at step $at and a GPU in: $line"
    else
        ok "$bug: ${line#validation FAILED: }"
    fi
    # The same command without the bug, once per distinct command.
    if ! grep -qxF -- "$np $args" "$work/clean" 2>/dev/null; then
        echo "$np $args" >> "$work/clean"
        tt_each "$np" $args
        if [ "$(rank_statuses)" = "${np}x0" ] && grep -q "^validation PASSED" "$work/out"; then
            ok "without a bug, -np $np $args: validation passed (worst relative error $(worst_error))"
        else
            not_ok "without a bug, -np $np $args: rank exit statuses $(rank_statuses), expected a pass"
        fi
    fi
done 3< "$work/records"
[ "$(wc -l < "$work/records")" -gt 0 ] || not_ok "no commands parsed from --inject-bug list"

# The hidden names of the bug lab: eight, no more.
expect_error "--inject-bug mystery-9" 2 "unknown --inject-bug 'mystery-9' (one of: .*mystery-1 \.\. mystery-8, list)" 1 --inject-bug mystery-9
finish

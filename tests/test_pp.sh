#!/bin/sh
# tests/test_pp.sh - pipeline parallelism and 3D layouts against the unsharded
# oracle: every schedule on 2-4 stages, with TP and DP, up to 12 ranks, passes
# --validate (loss and every gradient each step, weights and Adam moments at
# the end); the traffic equals the formulas (PP: one activation forward and
# one gradient back per micro-batch and chunk boundary, as the program's
# own check of its counters reports); the bubble report and --explain give
# the figures worked by hand. Each run is under run-test's timeout, so
# a deadlock fails the test.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 4 --dim 48 --heads 12 --seq 16 --batch 24 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0"


for sched in naive gpipe 1f1b; do
    validate_case 2 --pp 2 --micro-batches 4 --schedule $sched
    validate_case 4 --pp 4 --micro-batches 3 --schedule $sched
done
validate_case 2 --pp 2 --micro-batches 4 --schedule interleaved
validate_case 2 --pp 2 --micro-batches 2 --schedule interleaved --virtual-stages 2
validate_case 4 --tp 2 --pp 2 --micro-batches 4 --schedule 1f1b
validate_case 4 --pp 2 --dp 2 --micro-batches 3 --schedule gpipe
validate_case 8 --tp 2 --pp 2 --dp 2 --micro-batches 2 --schedule interleaved
validate_case 12 --tp 2 --pp 3 --dp 2 --micro-batches 4 --schedule 1f1b
validate_case 12 --tp 1 --pp 4 --dp 3 --micro-batches 2 --schedule gpipe --stage-layers 1,1,1,1
validate_case 6 --tp 3 --pp 2 --micro-batches 2 --schedule naive --stage-layers 3,1
validate_case 8 --tp 2 --pp 4 --micro-batches 4 --tp-mlp gather

# The bubble report: simulated and theory agree, p 2, m 4: 1/5 = 20.0%.
tt 2 $cfg --pp 2 --micro-batches 4 --schedule gpipe
row=$(awk '$1 ~ /^gpu1\(/ && $2 ~ /%$/ { print $3, $4 }' "$work/out")
[ "$status" -eq 0 ] && [ "$row" = "20.0% 20.0%" ] && ok "bubble report: simulated and theory $row" || not_ok "bubble report: '$row'"
# 1F1B holds at most p - stage micro-batches: 2 on stage 0, 1 on stage 1.
tt 2 $cfg --pp 2 --micro-batches 4 --schedule 1f1b
held=$(awk '$1 ~ /^gpu[01]\(/ && $2 ~ /%$/ { print $5 }' "$work/out" | tr '\n' ' ')
[ "$held" = "2 1 " ] && ok "1F1B peak held per stage: $held" || not_ok "1F1B peak held: '$held'"

# --explain narrates the step on the papers' grid: 4 stages, 4 micro-batches
# of GPipe take (m + p - 1) x (1 + 2) = 21 time steps (a backward fills two);
# its chart has a row per stage, and no line is wider than 100 characters.
tt 4 $cfg --pp 4 --micro-batches 4 --schedule gpipe --explain
if grep -q "^Time step 21" "$work/out" && ! grep -q "^Time step 22" "$work/out" &&
    grep -q "active GPUs 25%" "$work/out" && grep -q "forward of micro-batch 3 on chunk 0" "$work/out" &&
    grep -qx "g3    .  .  . F0 F1 F2 F3 B3 B3 B2 B2 B1 B1 B0 B0  .  .  .  .  .  ." "$work/out" &&
    grep -qx "GPUs, stage 0 first: g0 = gpu0(dp0,pp0,tp0), g1 = gpu1(dp0,pp1,tp0), g2 = gpu2(dp0,pp2,tp0)," "$work/out" &&
    [ "$(awk '/^one training step/ { on = 1 } /^trained steps/ { on = 0 } on && length > 100' "$work/out" | wc -l)" -eq 0 ]; then
    ok "--explain: 21 time steps, 25% active at the ends, the chart, lines within 100 characters"
else
    not_ok "--explain output"
fi
# On one stage there is one chunk and no bubble table to point at (it said
# "here 1 chunks" and pointed at a table it never prints).
tt 1 $cfg --micro-batches 2 --explain
if [ "$status" -eq 0 ] && grep -qx "a chunk is a run of consecutive blocks that one stage computes; here one, the whole model" "$work/out" &&
    grep -qx "(the virtual clocks' real costs are in --trace and --timeline)" "$work/out" &&
    ! grep -q "bubble table\|^pipeline bubble" "$work/out"; then
    ok "--explain on one stage: one chunk, no bubble table named or printed"
else
    not_ok "--explain on one stage (exit $status)"
fi

# A schedule that cannot work is refused before anything runs.
expect_error "interleaved needs m a multiple of p" 2 "needs the micro-batches (3) to be a multiple of the pipeline stages" 2 $cfg --pp 2 --micro-batches 3 --schedule interleaved
finish

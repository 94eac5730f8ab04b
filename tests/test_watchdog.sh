#!/bin/sh
# tests/test_watchdog.sh - the hang report: with --inject-bug stall the last
# rank stops for 30 s before its first communication of step 1; with
# --watchdog 3 the rank left waiting for it must report the wait (operation,
# peer, tag, step, micro-batch, and what the call is for) and end the job with exit 1 well before the
# stall would end. Without the watchdog the job would sit there, so the time
# bound is what proves the report ended it. A normal run with --watchdog 3 is
# unchanged (same checkpoint as with the watchdog off). Limits under 1 s are
# refused.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 2 --dim 32 --heads 4 --seq 32 --batch 4 --micro-batches 2 --warmup 3 --sample-len 0 --quiet --eval-every 0 --no-spot-check --steps 4"
now() { date +%s.%N; }

# stalled WHAT WANT ARGS...: a stalled job ends with exit 1 within 12 s (3 s
# of watchdog, the start-up and the teardown) and stderr holds the report,
# with every line of WANT (one fixed string per line).
stalled() {
    what=$1 want=$2
    shift 2
    t0=$(now)
    tt 2 $cfg --watchdog 3 --inject-bug stall "$@"
    took=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    missing=""
    printf '%s\n' "$want" > "$work/want"
    while IFS= read -r line; do
        grep -qF -- "$line" "$work/err" || missing="$missing [$line]"
    done < "$work/want"
    if [ "$status" -ne 1 ]; then
        not_ok "$what: exit $status, expected 1"
    elif awk -v t="$took" 'BEGIN { exit !(t > 12) }'; then
        not_ok "$what: the job took $took s to end"
    elif [ -n "$missing" ]; then
        not_ok "$what: the report lacks$missing"
    else
        ok "$what: exit 1 after $took s; report:"
        sed 's/^/#   /' "$work/err"
    fi
}

# Two pipeline stages, 1F1B with 2 micro-batches: stage 0 forwards both
# micro-batches, then waits for the gradient of micro-batch 0 from stage 1
# (gpu1), the message the stalled rank never sends. Its tag is the
# executor's (direction x chunks + chunk) x micro-batches + micro-batch =
# (1 x 2 + 0) x 2 + 0 = 4, and the report names what it is for: the
# gradient (direction 1) of micro-batch 0 into chunk 0, stage 0's one chunk.
# The last messages of the peer decode the same way: tag 5 = (1 x 2 + 0) x 2
# + 1, micro-batch 1's gradient into chunk 0, the last step 0 received; tag
# 3 = (0 x 2 + 1) x 2 + 1, micro-batch 1's activation into chunk 1, the last
# of step 1's forwards.
stalled "pp 2, stage 1 stalled" "tiny_transformer: watchdog: gpu0(dp0,pp0,tp0) (world rank 0) has waited
(--watchdog 3); ending the job
waiting in: recv on the PP group from gpu1(dp0,pp1,tp0) (world rank 1), tag 4, step 1, micro-batch 0
  for: the gradient of micro-batch 0 back into chunk 0
what this GPU last saw of that peer:
gpu1(dp0,pp1,tp0): last received from it the gradient of micro-batch 1 back into chunk 0 (tag 5, step 0, micro-batch 1)
last sent to it the activation of micro-batch 1 into chunk 1 (tag 3, step 1, micro-batch 1)" --pp 2

# Two DP replicas: replica 0 waits in a collective with the stalled one.
# After its micro-batches (one stage: no transfers) the first collective of
# a step over both replicas is the DP sum of the gradients (train.c: the
# loss travels with the gradient norm, after the DP sync): 42880 parameters
# x 4 B in buckets of 64 KiB (16384 floats) are ceil(42880 / 16384) = 3
# buckets, which --no-overlap starts and waits for front to back, so it
# waits in bucket 0 of 3 (numbered from 0), and the last collective both
# completed on DP is step 0's last bucket, 2 of 3.
stalled "dp 2, replica 1 stalled" "tiny_transformer: watchdog: gpu0(dp0,pp0,tp0) (world rank 0) has waited
waiting in: all-reduce on
gpu1(dp1,pp0,tp0)}, step 1
  for: the gradient all-reduce of bucket 0 of 3
DP the gradient all-reduce of bucket 2 of 3 (all-reduce, step 0)" --dp 2 --dp-bucket 64K --no-overlap

# A rank stopped from outside (SIGSTOP, as a debugger or a frozen host
# would) while it waits in a communication: its watchdog is frozen with it,
# and when it runs again the time it did not run must not count, or it
# reports at once a wait it did not watch (seen when mpirun continues a
# stopped rank to end the job: a second report, blaming the peer). Here
# rank 0 waits for the stalled rank 1 in step 1, is stopped half a second
# into that wait for 5 s (more than its 3 s limit), continued, and must stay
# silent for the next second; then it reports the wait it did watch, about
# 3 s, not the 6 s since the wait began.
$TT_MPIRUN -np 2 "$TT_BIN" $cfg --pp 2 --watchdog 3 --inject-bug stall \
    --log "$work/stop.csv" >"$work/out" 2>"$work/err" &
job=$!
wait_for 'grep -q "^[0-9]" "$work/stop.csv" 2>/dev/null'
sleep 0.5
rank0=$(rank_pid "$job" 0)
[ -n "$rank0" ] && kill -STOP "$rank0"
sleep 5
[ -n "$rank0" ] && kill -CONT "$rank0"
sleep 1
early=$(grep -c "has waited" "$work/err")
wait_for '! kill -0 "$job" 2>/dev/null'
kill "$job" 2>/dev/null
wait "$job"
waited=$(sed -n 's/.*(world rank 0) has waited \([0-9.]*\) s.*/\1/p' "$work/err" | head -n 1)
if [ -z "$rank0" ]; then
    not_ok "rank 0 stopped: its process was not found"
elif [ "$early" -ne 0 ]; then
    not_ok "rank 0 stopped for 5 s: it reported within 1 s of continuing ($(grep 'has waited' "$work/err" | head -n 1))"
elif [ -z "$waited" ] || awk -v w="$waited" 'BEGIN { exit !(w >= 4.5) }'; then
    not_ok "rank 0 stopped for 5 s: then no report, or one counting the stop ('$waited' s)"
else
    ok "rank 0 stopped for 5 s mid-wait: silent for 1 s once continued, then a wait of $waited s"
fi

# Unaffected: the watchdog on or off, the same checkpoint and no report.
tt 2 $cfg --pp 2 --watchdog 0 --save "$work/off.st"
s0=$status
tt 2 $cfg --pp 2 --watchdog 3 --save "$work/on.st"
if [ "$s0" -eq 0 ] && [ "$status" -eq 0 ] && ! [ -s "$work/err" ] && cmp -s "$work/off.st" "$work/on.st"; then
    ok "--watchdog 3 on a healthy run: exit 0, nothing on stderr, checkpoint equal to --watchdog 0's"
else
    not_ok "healthy run with --watchdog 3: exit $status (off: $s0)"
fi
expect_error "--watchdog -1" 2 "watchdog" 2 --watchdog -1
# A limit under a second would end healthy runs (a stage waits through the
# others' compute): refused, naming the value; 0 (off) is taken above.
expect_error "--watchdog 0.000001" 2 "^tiny_transformer: --watchdog must be between 1 and 1e+09 (or 0: off), got 0.000001" \
    2 --watchdog 0.000001
finish

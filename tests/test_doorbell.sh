#!/bin/sh
# tests/test_doorbell.sh - how ranks wait changes no bit: whole runs with the
# doorbells (the default) and with TT_NO_DOORBELL=1 (every wait polls, the
# members of a collective meet through MPI instead of shared memory) write
# the same checkpoint, byte for byte, on tp 2 x pp 2 x dp 2 (pairs exchange:
# TP, PP and DP groups of two), on tp 2 x dp 2 with sequence parallelism and
# ZeRO-3 (pairs all-gather and reduce-scatter) and on pp 2 x dp 3 (a DP group of three: its
# gradients through MPI, its loss and norm gathered and summed in rank
# order). A planted difference (another seed) must differ, so cmp can fail.
# Also: tp 3 x dp 2 without Open MPI's single-copy transport (a long message
# then needs its sender's progress) finishes, with the same bits, and the
# 12-rank default layout finishes with the bells on and off.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 4 --dim 48 --heads 4 --seq 16 --batch 24 --steps 3 --sample-len 0 --eval-every 0 --no-spot-check --quiet"
launch() { # NAME NP ARGS...
    name=$1 np=$2
    shift 2
    $TT_MPIRUN -x TT_NO_DOORBELL -np "$np" "$TT_BIN" $cfg "$@" --save "$work/$name.st" \
        >"$work/out" 2>"$work/err"
    status=$?
}

for lay in "8:--tp 2 --pp 2 --dp 2 --micro-batches 2" "6:--pp 2 --dp 3 --micro-batches 2" \
    "4:--tp 2 --dp 2 --micro-batches 2 --sequence-parallel --zero 3"; do
    np=${lay%%:*}
    flags=${lay#*:}
    TT_NO_DOORBELL=0 launch bells "$np" $flags
    s1=$status
    TT_NO_DOORBELL=1 launch polls "$np" $flags
    s2=$status
    cp "$work/bells.st" "$work/bells_$np.st" 2>/dev/null # the planted case below compares with np 8's
    if [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && cmp -s "$work/bells.st" "$work/polls.st"; then
        ok "$flags: the same checkpoint with doorbells and with polling"
    else
        not_ok "$flags: exits $s1 and $s2; $(cmp "$work/bells.st" "$work/polls.st" 2>&1)"
    fi
done
# The same layout and flags as the first case's, but for the seed: the
# checkpoints differ only in their values, so cmp is shown able to fail on
# what the cases above compare.
TT_NO_DOORBELL=0 launch seed 8 --tp 2 --pp 2 --dp 2 --micro-batches 2 --seed 7
if [ "$status" -ne 0 ] || [ ! -s "$work/bells_8.st" ]; then
    not_ok "planted: the seed-7 run exits $status, or the first case left no checkpoint"
elif cmp -s "$work/seed.st" "$work/bells_8.st"; then
    not_ok "planted: another seed gave the same checkpoint; cmp cannot tell"
else
    ok "planted: another seed gives another checkpoint on the same layout (cmp can fail)"
fi
# Without Open MPI's single-copy transport a long message moves only while
# its sender also makes progress: a rank must not sleep through a transfer a
# waiting member needs (this layout hung once: a rank parked in the clipping
# norm's barrier held back the DP exchange its partner waited for).
for nb in 0 1; do
    TT_NO_DOORBELL=$nb $TT_MPIRUN -x TT_NO_DOORBELL --mca btl_vader_single_copy_mechanism none \
        -np 6 "$TT_BIN" $cfg --tp 3 --dp 2 --heads 6 --micro-batches 2 --save "$work/nocma$nb.st" \
        >"$work/out" 2>"$work/err"
    eval "s$nb=\$?"
done
if [ "$s0" -eq 0 ] && [ "$s1" -eq 0 ] && cmp -s "$work/nocma0.st" "$work/nocma1.st"; then
    ok "tp 3 x dp 2 without single-copy: finishes, the same checkpoint with doorbells and polling"
else
    not_ok "tp 3 x dp 2 without single-copy: exits $s0 and $s1; $(cmp "$work/nocma0.st" "$work/nocma1.st" 2>&1)"
fi
for nb in 0 1; do
    TT_NO_DOORBELL=$nb launch default 12 --tp 2 --pp 3 --dp 2
    [ "$status" -eq 0 ] && ok "12 ranks (tp 2 x pp 3 x dp 2), TT_NO_DOORBELL=$nb: trained and saved" ||
        not_ok "12 ranks, TT_NO_DOORBELL=$nb: exit $status"
done
finish

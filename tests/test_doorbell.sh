#!/bin/sh
# tests/test_doorbell.sh - how ranks wait changes no bit: whole runs with the
# doorbells (the default) and with TT_NO_DOORBELL=1 (every wait polls, the
# members of a collective meet through MPI instead of shared memory) write
# the same checkpoint, byte for byte, on tp 2 x pp 2 x dp 2 (pairs exchange:
# TP, PP and DP groups of two) and on pp 2 x dp 3 (a DP group of three: its
# gradients through MPI, its loss and norm gathered and summed in rank
# order). A planted difference (another seed) must differ, so cmp can fail.
# Also: the 12-rank default layout finishes with the bells on and off.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 4 --dim 48 --heads 4 --seq 16 --batch 24 --steps 3 --sample-len 0 --eval-every 0 --no-spot-check --quiet"
launch() { # NAME NP ARGS...
    name=$1 np=$2
    shift 2
    $TT_MPIRUN -x TT_NO_DOORBELL -np "$np" "$TT_BIN" $cfg "$@" --save "$work/$name.st" \
        >"$work/out" 2>"$work/err"
    status=$?
}

for lay in "8:--tp 2 --pp 2 --dp 2 --micro-batches 2" "6:--pp 2 --dp 3 --micro-batches 2"; do
    np=${lay%%:*}
    flags=${lay#*:}
    TT_NO_DOORBELL=0 launch bells "$np" $flags
    s1=$status
    TT_NO_DOORBELL=1 launch polls "$np" $flags
    s2=$status
    if [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && cmp -s "$work/bells.st" "$work/polls.st"; then
        ok "$flags: the same checkpoint with doorbells and with polling"
    else
        not_ok "$flags: exits $s1 and $s2; $(cmp "$work/bells.st" "$work/polls.st" 2>&1)"
    fi
done
TT_NO_DOORBELL=0 launch seed 8 --tp 2 --pp 2 --dp 2 --micro-batches 2 --seed 7
if cmp -s "$work/seed.st" "$work/bells.st"; then
    not_ok "planted: another seed gave the same checkpoint; cmp cannot tell"
else
    ok "planted: another seed gives another checkpoint (cmp can fail)"
fi
for nb in 0 1; do
    TT_NO_DOORBELL=$nb launch default 12 --tp 2 --pp 3 --dp 2
    [ "$status" -eq 0 ] && ok "12 ranks (tp 2 x pp 3 x dp 2), TT_NO_DOORBELL=$nb: trained and saved" ||
        not_ok "12 ranks, TT_NO_DOORBELL=$nb: exit $status"
done
finish

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
# then needs its sender's progress) finishes, with the same bits; MPI's
# blocking collectives and the non-blocking ones used where MPI would spin
# (TT_MPI_YIELDS) give the same bits; and the 12-rank default layout
# finishes with the bells on and off.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 4 --dim 48 --heads 4 --seq 16 --batch 24 --steps 3 --sample-len 0 --eval-every 0 --no-spot-check --quiet"
launch() { # NAME NP ARGS...
    name=$1 np=$2
    shift 2
    env TT_NO_DOORBELL="${TT_NO_DOORBELL:-0}" TT_MPI_YIELDS="${TT_MPI_YIELDS:-}" \
        $TT_MPIRUN -np "$np" "$TT_BIN" $cfg "$@" --save "$work/$name.st" \
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
if openmpi_only "tp 3 x dp 2 without single-copy (an option of Open MPI's shared memory)"; then
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
fi
# How MPI's own waits behave (TT_MPI_YIELDS, tt/comm/doorbell.h): with 0, as
# under MPICH, every collective after a meeting is MPI's non-blocking one,
# tested with a yield between tests; with 1, as under Open MPI, its blocking
# call. Groups of three and four take those paths: pp 2 x dp 3 (the DP
# gradients' all-reduce waited for after the members meet, the loss and norm
# all-gathered), tp 2 x dp 3 with ZeRO-3 (all-gathers and reduce-scatters
# over three), tp 4 (the TP sums through MPI_Allreduce), each with
# --validate (a gather and broadcasts). The same bits either way, and the
# run says which way it waits when its ranks share cores.
for lay in "6:--pp 2 --dp 3 --micro-batches 2" "6:--tp 2 --dp 3 --zero 3 --micro-batches 2" \
    "4:--tp 4 --micro-batches 2"; do
    np=${lay%%:*}
    flags=${lay#*:}
    TT_MPI_YIELDS=1 launch blocking "$np" $flags --validate
    s1=$status
    said1=$(grep -c "^cores: this MPI's blocking calls keep the core" "$work/out")
    TT_MPI_YIELDS=0 launch yielding "$np" $flags --validate
    s2=$status
    said2=$(grep -c "^cores: this MPI's blocking calls keep the core" "$work/out")
    # the run's cores lines come only where its ranks outnumber the CPUs
    want=00
    [ "$np" -gt "$(nproc)" ] && want=01
    if [ "$s1" -eq 0 ] && [ "$s2" -eq 0 ] && [ "$said1$said2" = "$want" ] &&
        cmp -s "$work/blocking.st" "$work/yielding.st"; then
        ok "$flags: the same checkpoint with MPI's blocking collectives and its non-blocking ones, validated"
    else
        not_ok "$flags: exits $s1 and $s2, said '$said1$said2' (want $want); $(cmp "$work/blocking.st" "$work/yielding.st" 2>&1)"
    fi
done
TT_MPI_YIELDS=yes launch refused 2
[ "$status" -eq 2 ] && grep -q "^tiny_transformer: TT_MPI_YIELDS='yes' in the environment" "$work/err" &&
    ok "TT_MPI_YIELDS=yes is refused, naming it" ||
    not_ok "TT_MPI_YIELDS=yes: exit $status, $(head -c 300 "$work/err")"
unset TT_MPI_YIELDS # an assignment before a function stays in some shells
TT_NO_DOORBELL=yes launch refused 2
[ "$status" -eq 2 ] && grep -q "^tiny_transformer: TT_NO_DOORBELL='yes' in the environment: 1 makes every wait poll" "$work/err" &&
    ok "TT_NO_DOORBELL=yes is refused, naming it (it once meant the bells off)" ||
    not_ok "TT_NO_DOORBELL=yes: exit $status, $(head -c 300 "$work/err")"
unset TT_NO_DOORBELL
for nb in 0 1; do
    TT_NO_DOORBELL=$nb launch default 12 --tp 2 --pp 3 --dp 2
    [ "$status" -eq 0 ] && ok "12 ranks (tp 2 x pp 3 x dp 2), TT_NO_DOORBELL=$nb: trained and saved" ||
        not_ok "12 ranks, TT_NO_DOORBELL=$nb: exit $status"
done
finish

#!/bin/sh
# tests/test_zero.sh - ZeRO (--zero 1, 2, 3) against the unsharded oracle and
# against the run without ZeRO: --validate passes on several layouts and
# schedules with 1 and 4 micro-batches (worst errors printed), the DP
# replicas' weights end bit-identical, the traffic equals its formula, the
# checkpoints are the same bytes as without ZeRO where the sums are the same
# float operations, a ZeRO checkpoint resumes without ZeRO on another layout
# and the reverse, the oracle catches planted bugs under ZeRO, and the flag's
# wrong uses are one clear line. Stage 3 (weights sharded, each unit gathered
# before its forward and backward) also: eval over windows the DP ranks
# cannot share equally, and its traffic by hand (1.5 x DP in ring bytes).
. "$TT_SRCDIR/testlib.sh"

# expect_dp_traffic WHAT RS AG: the last run exited 0 and the rows of its
# traffic table for the DP reduce-scatter and all-gather read RS and AG
# (calls, their formula, bytes, their formula), worked out by hand.
expect_dp_traffic() {
    rs=$(awk '$1 == "DP" && $2 == "reduce-scatter" { print $3, $4, $5, $6 }' "$work/out")
    ag=$(awk '$1 == "DP" && $2 == "all-gather" { print $3, $4, $5, $6 }' "$work/out")
    if [ "$status" -eq 0 ] && [ "$rs" = "$2" ] && [ "$ag" = "$3" ]; then
        ok "$1 traffic by hand: reduce-scatter $2, all-gather $3"
    else
        not_ok "$1 traffic: reduce-scatter '$rs' (want '$2'), all-gather '$ag' (want '$3')"
    fi
}

cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4"
must_say="DP replicas bit-identical (weights; ZeRO shards the Adam moments): yes"

# --validate: loss and every gradient each step, weights and moments at the end.
validate_case 2 --dp 2 --zero 1 --micro-batches 4
validate_case 4 --dp 4 --zero 1 --micro-batches 1
validate_case 4 --tp 2 --dp 2 --zero 1 --micro-batches 4
validate_case 4 --pp 2 --dp 2 --tp 1 --schedule 1f1b --zero 1 --micro-batches 4
validate_case 4 --pp 2 --dp 2 --tp 1 --schedule interleaved --zero 1 --micro-batches 4 --layers 4
validate_case 2 --dp 2 --zero 2 --micro-batches 1
validate_case 4 --dp 4 --zero 2 --micro-batches 4
validate_case 4 --tp 2 --dp 2 --zero 2 --micro-batches 4
validate_case 4 --pp 2 --dp 2 --tp 1 --schedule 1f1b --zero 2 --micro-batches 4
validate_case 4 --pp 2 --dp 2 --tp 1 --schedule interleaved --zero 2 --micro-batches 4 --layers 4

# The traffic, worked by hand. This config has P = 42368 floats (test_dp.sh)
# in 4 units (embeddings 8704, two blocks of 12704, head 8256), all even, so
# dp 2 pads nothing. ZeRO-1, 3 steps: one reduce-scatter and one all-gather
# per unit and step = 12 calls each, each way 3 x 4 x 42368 = 508416 bytes:
# what DP's all-reduce books for the same steps. ZeRO-2 with 4 micro-batches
# reduce-scatters every unit once per micro-batch: 48 calls, 4 x 508416, and
# gathers the updated weights once per step as ZeRO-1 does: 12 calls, 508416.
tt 2 $cfg --dp 2 --zero 1 --micro-batches 4
expect_dp_traffic "ZeRO-1" "12 12 508416 508416" "12 12 508416 508416"
tt 2 $cfg --dp 2 --zero 2 --micro-batches 4
expect_dp_traffic "ZeRO-2 (4 micro-batches)" "48 48 2033664 2033664" "12 12 508416 508416"

# Checkpoints: the same bytes as without ZeRO. With dp 2 every sum over the
# DP group is one addition (a + b = b + a), so reduce-scatter and all-reduce
# give the same bits; ZeRO-2 also needs one micro-batch (with several it adds
# the replicas per micro-batch, another order: within the oracle's tolerance,
# not bit-identical; doc/memory.md).
same_ckpt() {
    np=$1 what=$2
    shift 2
    tt "$np" $cfg "$@" --zero 0 --save "$work/z0.st"
    s0=$status
    tt "$np" $cfg "$@" --zero "$what" --save "$work/z.st"
    if [ "$s0" -eq 0 ] && [ "$status" -eq 0 ] && cmp -s "$work/z0.st" "$work/z.st"; then
        ok "checkpoint of --zero $what $* is byte-identical to --zero 0's"
    else
        not_ok "checkpoint of --zero $what $*: exit $s0/$status or the files differ"
    fi
}
same_ckpt 2 1 --dp 2 --micro-batches 4
same_ckpt 2 2 --dp 2 --micro-batches 1
same_ckpt 4 1 --pp 2 --dp 2 --tp 1 --micro-batches 4

# resume_both_ways Z RUN: RUN (4 steps) stopped at step 2 on dp 2 under
# --zero Z and under --zero 0. The ZeRO-Z checkpoint is the zero-0 one's
# bytes (dp 2: every sum is one addition, as above) and, continued without
# ZeRO on tp 2 x pp 2, gives the same file as the zero-0 checkpoint continued
# the same way; continued with ZeRO-Z on its own layout, the same file as the
# uninterrupted ZeRO-Z run. The zero-0 checkpoint stays in $work/z0_2.st for
# the reverse direction.
resume_both_ways() {
    z=$1 run=$2
    tt 2 $run --dp 2 --zero "$z" --stop-at 2 --save "$work/z_2.st"
    sz=$status
    tt 2 $run --dp 2 --zero 0 --stop-at 2 --save "$work/z0_2.st"
    s0=$status
    tt 4 $run --tp 2 --pp 2 --dp 1 --resume "$work/z_2.st" --save "$work/z_4.st"
    sz4=$status
    tt 4 $run --tp 2 --pp 2 --dp 1 --resume "$work/z0_2.st" --save "$work/z0_4.st"
    if [ "$sz$s0$sz4$status" = 0000 ] && cmp -s "$work/z_2.st" "$work/z0_2.st" &&
        cmp -s "$work/z_4.st" "$work/z0_4.st"; then
        ok "a ZeRO-$z checkpoint (the zero-0 bytes) resumed without ZeRO on tp 2 x pp 2 equals the zero-0 one resumed"
    else
        not_ok "ZeRO-$z checkpoint resumed on tp2 pp2: exits $sz $s0 $sz4 $status, or the files differ"
    fi
    tt 2 $run --dp 2 --zero "$z" --resume "$work/z_2.st" --save "$work/zr_4.st"
    sr=$status
    tt 2 $run --dp 2 --zero "$z" --save "$work/zw_4.st"
    if [ "$sr$status" = 00 ] && cmp -s "$work/zr_4.st" "$work/zw_4.st"; then
        ok "ZeRO-$z: 2 steps + resume to 4 is byte-identical to 4 steps in one run"
    else
        not_ok "ZeRO-$z resume on its own layout: exits $sr $status, or the files differ"
    fi
}

# Resume across with ZeRO-1 (2 micro-batches); the reverse: the zero-0
# checkpoint continued under ZeRO-2 on dp 4 passes the oracle.
run4="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4 --micro-batches 2"
resume_both_ways 1 "$run4"
cfg="$run4"
must_say="resumed from '$work/z0_2.st' at step 2"
validate_case 4 --dp 4 --zero 2 --resume "$work/z0_2.st"

# ZeRO-3: the weights sharded too, each unit gathered before its forward and
# its backward. The oracle on the layouts of the brief, the last one with
# everything at once (tp, interleaved pp, dp, full recomputation).
cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4"
must_say="DP replicas: none to compare (ZeRO-3 shards the weights too"
validate_case 2 --dp 2 --zero 3 --micro-batches 1
# Its traffic in ring bytes (P = 42368 in 4 even units, as above; 3 steps;
# half of each buffer on dp 2): 2 x 254208 + 254208 = 762624, 1.5 x the
# 508416 that DP's all-reduce sends (2 x 1/2 x 508416). The oracle's own
# traffic has a row of its own.
ring3=$(awk '$1 == "DP" && ($2 == "reduce-scatter" || $2 == "all-gather") { s += $NF } END { print s }' "$work/out")
if [ "$status" -eq 0 ] && [ "$ring3" = 762624 ]; then
    ok "ZeRO-3 ring bytes with one micro-batch: 762624 = 1.5 x DP's 508416"
else
    not_ok "ZeRO-3 ring bytes '$ring3' (want 762624 = 1.5 x DP's 508416)"
fi
validate_case 4 --dp 4 --zero 3 --micro-batches 4
# By hand: with 4 micro-batches every unit is gathered twice and reduced
# once per micro-batch: 96 all-gathers of 3 x 2 x 4 x 4 x 42368 = 4067328
# bytes and 48 reduce-scatters of 2033664 (the units divide by 4 too, and
# comm books whole buffers, so dp does not change these).
expect_dp_traffic "ZeRO-3 (4 micro-batches)" "48 48 2033664 2033664" "96 96 4067328 4067328"
validate_case 4 --tp 2 --dp 2 --zero 3 --micro-batches 4
validate_case 4 --pp 2 --dp 2 --tp 1 --schedule interleaved --zero 3 --micro-batches 4 --layers 4
validate_case 8 --tp 2 --pp 2 --dp 2 --zero 3 --recompute full --schedule interleaved --micro-batches 4 --layers 4

# Eval under ZeRO-3: 5 windows over dp 4 (1, 1, 1, 2) in forwards of one
# sequence, so three ranks run a forward they drop, or the gathers wait
# forever (tried: without it this run hangs; hence its own timeout); the
# eval loss and the sample are the unsharded run's.
ecfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 4 --steps 1 --sample-len 8 --eval-every 1 --eval-windows 5 --micro-batches 1"
launcher=$TT_MPIRUN
TT_MPIRUN="timeout 60 $launcher"
tt 4 $ecfg --dp 4 --zero 3
TT_MPIRUN=$launcher
e3=$(grep -o "eval loss [0-9.]*" "$work/out"; grep -A1 "^sample" "$work/out")
s3=$status
tt 4 $ecfg --dp 4 --zero 0
e0=$(grep -o "eval loss [0-9.]*" "$work/out"; grep -A1 "^sample" "$work/out")
if [ "$s3$status" = 00 ] && [ -n "$e3" ] && [ "$e3" = "$e0" ]; then
    ok "ZeRO-3 eval over unequal windows and the sample: as without ZeRO ($(echo $e3 | head -c 40))"
else
    not_ok "ZeRO-3 eval: exits $s3/$status, '$e3' vs '$e0'"
fi

# Checkpoints: the same bytes as without ZeRO with one micro-batch on dp 2.
same_ckpt 2 3 --dp 2 --micro-batches 1
same_ckpt 4 3 --pp 2 --dp 2 --tp 1 --micro-batches 1
# Resume both ways with ZeRO-3 (one micro-batch, so the step-2 files are
# the same bytes: same_ckpt above); and a zero-0 checkpoint passes the
# oracle continued under ZeRO-3 on dp 4.
run3="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4 --micro-batches 1"
resume_both_ways 3 "$run3"
cfg="$run3"
must_say="resumed from '$work/z0_2.st' at step 2"
validate_case 4 --dp 4 --zero 3 --micro-batches 2 --resume "$work/z0_2.st"

# The oracle still sees a wrong gradient under ZeRO: a planted scaled slice
# (on the GPU that owns it) and a skipped reduction each fail validation.
cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 8 --micro-batches 2 --steps 2 --validate --quiet --sample-len 0 --eval-every 0 --eval-windows 4"
for case in "grad-shard 1" "dp-no-sync 2" "grad-shard 3" "dp-no-sync 3"; do
    set -- $case
    tt_each 2 $cfg --dp 2 --zero "$2" --inject-bug "$1"
    statuses=$(rank_statuses)
    line=$(grep "^validation FAILED" "$work/out")
    if [ "$statuses" = "2x1" ] && [ -n "$line" ]; then
        ok "--zero $2 --inject-bug $1: ${line#validation FAILED: }"
    else
        not_ok "--zero $2 --inject-bug $1: statuses $statuses, verdict '$line'"
    fi
done

# Wrong uses: one line, usage status on every rank.
expect_error "--zero 1 with dp 1" 2 "^tiny_transformer: --zero 1 needs a data-parallel group.*dp 1" \
    2 --tp 2 --dp 1 --pp 1 --zero 1 --steps 1
expect_error "--zero 3 with dp 1 names the weights" 2 \
    "^tiny_transformer: --zero 3 needs a data-parallel group: ZeRO shards the optimizer state, the gradients and the weights over the dp GPUs" \
    2 --tp 2 --dp 1 --pp 1 --zero 3 --steps 1
expect_error "--zero 4" 2 "zero" 2 --dp 2 --zero 4 --steps 1

finish

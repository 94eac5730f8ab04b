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
# Each kind of check is one table of cases (a here-doc read on fd 3, since
# mpirun would read the loop's stdin), fields separated by '|'.
. "$TT_SRCDIR/testlib.sh"

cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4"

# --validate (validate_case, testlib.sh): loss and every gradient each step,
# weights and moments at the end. Under stages 1 and 2 the DP replicas' weights
# are also bit-identical; under ZeRO-3 (the weights sharded too, each unit
# gathered before its forward and its backward) there are no whole replicas
# to compare. Each stage on dp alone, with tp and with pp (interleaved;
# stages 1 and 2 also 1f1b), the last row with everything at once (tp,
# interleaved pp, dp, full recomputation).
# Columns: ranks | the layout and ZeRO stage after $cfg.
while IFS='|' read -r np args <&3; do
    case " $args " in
    *" --zero 3 "*) must_say="DP replicas: none to compare (ZeRO-3 shards the weights too" ;;
    *) must_say="DP replicas bit-identical (weights; ZeRO shards the Adam moments): yes" ;;
    esac
    validate_case "$np" $args
done 3<<'T'
2|--dp 2 --zero 1 --micro-batches 4
4|--dp 4 --zero 1 --micro-batches 1
4|--tp 2 --dp 2 --zero 1 --micro-batches 4
4|--pp 2 --dp 2 --tp 1 --schedule 1f1b --zero 1 --micro-batches 4
4|--pp 2 --dp 2 --tp 1 --schedule interleaved --zero 1 --micro-batches 4 --layers 4
2|--dp 2 --zero 2 --micro-batches 1
4|--dp 4 --zero 2 --micro-batches 4
4|--tp 2 --dp 2 --zero 2 --micro-batches 4
4|--pp 2 --dp 2 --tp 1 --schedule 1f1b --zero 2 --micro-batches 4
4|--pp 2 --dp 2 --tp 1 --schedule interleaved --zero 2 --micro-batches 4 --layers 4
2|--dp 2 --zero 3 --micro-batches 1
4|--dp 4 --zero 3 --micro-batches 4
4|--tp 2 --dp 2 --zero 3 --micro-batches 4
4|--pp 2 --dp 2 --tp 1 --schedule interleaved --zero 3 --micro-batches 4 --layers 4
8|--tp 2 --pp 2 --dp 2 --zero 3 --recompute full --schedule interleaved --micro-batches 4 --layers 4
T

# The traffic, worked by hand. This config has P = 42368 floats (test_dp.sh)
# in 4 units (embeddings 8704, two blocks of 12704, head 8256), all even and
# all divisible by 4, so dp 2 and dp 4 pad nothing; comm books whole
# buffers, so dp changes calls and bytes in none of these. 3 steps.
# - ZeRO-1: one reduce-scatter and one all-gather per unit and step = 12
#   calls each, each way 3 x 4 x 42368 = 508416 bytes: what DP's all-reduce
#   books for the same steps.
# - ZeRO-2 with 4 micro-batches reduce-scatters every unit once per
#   micro-batch: 48 calls, 4 x 508416, and gathers the updated weights once
#   per step as ZeRO-1 does: 12 calls, 508416.
# - ZeRO-3 gathers every unit twice (before its forward and its backward)
#   and reduces it once per micro-batch: with one, 12 reduce-scatters of
#   508416 and 24 all-gathers of 2 x 508416; with 4 micro-batches, 48
#   reduce-scatters of 2033664 and 96 all-gathers of 3 x 2 x 4 x 4 x 42368 =
#   4067328.
# Ring bytes, what a GPU sends (doc/communication.md: (n-1)/n of the buffer
# each way), both operations added: on dp 2 half of the bytes, so ZeRO-1
# 508416 (as DP's all-reduce, 2 x 1/2 x 508416), ZeRO-2 (2033664 + 508416)
# / 2 = 1271040, ZeRO-3 with one micro-batch (508416 + 1016832) / 2 = 762624,
# 1.5 x DP's 508416; on dp 4 three quarters: (2033664 + 4067328) x 3/4 =
# 4575744. The oracle's own traffic (the spot check) has a row of its own.
# Columns: what | ranks | the layout after $cfg | the reduce-scatter row and
# the all-gather row (calls, their formula, bytes, their formula) | ring bytes.
while IFS='|' read -r what np args rs ag ring <&3; do
    tt "$np" $cfg $args
    got_rs=$(awk '$1 == "DP" && $2 == "reduce-scatter" { print $3, $4, $5, $6 }' "$work/out")
    got_ag=$(awk '$1 == "DP" && $2 == "all-gather" { print $3, $4, $5, $6 }' "$work/out")
    got_ring=$(awk '$1 == "DP" && ($2 == "reduce-scatter" || $2 == "all-gather") { s += $NF } END { print s }' "$work/out")
    if [ "$status" -eq 0 ] && [ "$got_rs" = "$rs" ] && [ "$got_ag" = "$ag" ] && [ "$got_ring" = "$ring" ]; then
        ok "$what traffic by hand: reduce-scatter $rs, all-gather $ag, ring bytes $ring"
    else
        not_ok "$what traffic: exit $status, reduce-scatter '$got_rs' (want '$rs'), all-gather '$got_ag' (want '$ag'), ring bytes '$got_ring' (want '$ring')"
    fi
done 3<<'T'
ZeRO-1|2|--dp 2 --zero 1 --micro-batches 4|12 12 508416 508416|12 12 508416 508416|508416
ZeRO-2 (4 micro-batches)|2|--dp 2 --zero 2 --micro-batches 4|48 48 2033664 2033664|12 12 508416 508416|1271040
ZeRO-3 (1 micro-batch: ring bytes 1.5 x DP's 508416)|2|--dp 2 --zero 3 --micro-batches 1|12 12 508416 508416|24 24 1016832 1016832|762624
ZeRO-3 (4 micro-batches)|4|--dp 4 --zero 3 --micro-batches 4|48 48 2033664 2033664|96 96 4067328 4067328|4575744
T

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

# Checkpoints: the same bytes as without ZeRO. With dp 2 every sum over the
# DP group is one addition (a + b = b + a), so reduce-scatter and all-reduce
# give the same bits; ZeRO-2 and ZeRO-3 also need one micro-batch (with
# several they add the replicas per micro-batch, another order: within the
# oracle's tolerance, not bit-identical; doc/memory.md).
# Columns: ranks | ZeRO stage | the layout after $cfg.
while IFS='|' read -r np z args <&3; do
    tt "$np" $cfg $args --zero 0 --save "$work/z0.st"
    s0=$status
    tt "$np" $cfg $args --zero "$z" --save "$work/z.st"
    if [ "$s0" -eq 0 ] && [ "$status" -eq 0 ] && cmp -s "$work/z0.st" "$work/z.st"; then
        ok "checkpoint of --zero $z $args is byte-identical to --zero 0's"
    else
        not_ok "checkpoint of --zero $z $args: exit $s0/$status or the files differ"
    fi
done 3<<'T'
2|1|--dp 2 --micro-batches 4
2|2|--dp 2 --micro-batches 1
4|1|--pp 2 --dp 2 --tp 1 --micro-batches 4
2|3|--dp 2 --micro-batches 1
4|3|--pp 2 --dp 2 --tp 1 --micro-batches 1
T

# resume_both_ways Z RUN: RUN (4 steps) stopped at step 2 on dp 2 under
# --zero Z and under --zero 0. The ZeRO-Z checkpoint is the zero-0 one's
# bytes (dp 2: every sum is one addition, as above) and, continued without
# ZeRO on tp 2 x pp 2, passes the oracle; continued with ZeRO-Z on its own
# layout, it gives the same file as the
# uninterrupted ZeRO-Z run. The zero-0 checkpoint stays in $work/z0_2.st for
# the reverse direction.
resume_both_ways() {
    z=$1 run=$2
    tt 2 $run --dp 2 --zero "$z" --stop-at 2 --save "$work/z_2.st"
    sz=$status
    tt 2 $run --dp 2 --zero 0 --stop-at 2 --save "$work/z0_2.st"
    s0=$status
    # the same bytes: resuming either is the same run, so it is checked
    # once, against the oracle
    tt 4 $run --tp 2 --pp 2 --dp 1 --resume "$work/z_2.st" --validate
    if [ "$sz$s0$status" = 000 ] && cmp -s "$work/z_2.st" "$work/z0_2.st" &&
        grep -q "validation PASSED" "$work/out"; then
        ok "a ZeRO-$z checkpoint (the zero-0 bytes) resumed without ZeRO on tp 2 x pp 2 passes --validate (worst relative error $(worst_error))"
    else
        not_ok "ZeRO-$z checkpoint resumed on tp2 pp2: exits $sz $s0 $status, the files differ, or validation failed"
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

# Resume both ways, then the reverse: the zero-0 checkpoint continued under
# ZeRO on dp 4 passes the oracle. ZeRO-3 with one micro-batch, so that the
# step-2 files are the same bytes (the checkpoints above).
# Columns: ZeRO stage | micro-batches of the run | ZeRO and micro-batches of
# the oracle's run on dp 4 from the zero-0 checkpoint.
run="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4"
while IFS='|' read -r z mb reverse <&3; do
    resume_both_ways "$z" "$run --micro-batches $mb"
    cfg="$run --micro-batches $mb"
    must_say="resumed from '$work/z0_2.st' at step 2"
    validate_case 4 --dp 4 $reverse --resume "$work/z0_2.st"
done 3<<'T'
1|2|--zero 2
3|1|--zero 3 --micro-batches 2
T

# The oracle still sees a wrong gradient under ZeRO: a planted scaled slice
# (on the GPU that owns it) and a skipped reduction each fail validation.
# Columns: the planted bug | the ZeRO stage.
cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 8 --micro-batches 2 --steps 2 --validate --quiet --sample-len 0 --eval-every 0 --eval-windows 4"
while IFS='|' read -r bug z <&3; do
    tt_each 2 $cfg --dp 2 --zero "$z" --inject-bug "$bug"
    statuses=$(rank_statuses)
    line=$(grep "^validation FAILED" "$work/out")
    if [ "$statuses" = "2x1" ] && [ -n "$line" ]; then
        ok "--zero $z --inject-bug $bug: ${line#validation FAILED: }"
    else
        not_ok "--zero $z --inject-bug $bug: statuses $statuses, verdict '$line'"
    fi
done 3<<'T'
grad-shard|1
dp-no-sync|2
grad-shard|3
dp-no-sync|3
T

# Wrong uses: one line, usage status on every rank.
# Columns: what | the pattern of the message | the arguments (on 2 ranks).
while IFS='|' read -r what pattern args <&3; do
    expect_error "$what" 2 "$pattern" 2 $args
done 3<<'T'
--zero 1 with dp 1|^tiny_transformer: --zero 1 needs a data-parallel group.*dp 1|--tp 2 --dp 1 --pp 1 --zero 1 --steps 1
--zero 3 with dp 1 names the weights|^tiny_transformer: --zero 3 needs a data-parallel group: ZeRO shards the optimizer state, the gradients and the weights over the dp GPUs|--tp 2 --dp 1 --pp 1 --zero 3 --steps 1
--zero 4|zero|--dp 2 --zero 4 --steps 1
T

finish

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
# reduce-scatters every unit once per micro-batch: 48 calls, 4 x 508416.
tt 2 $cfg --dp 2 --zero 1 --micro-batches 4
rs=$(awk '$1 == "DP" && $2 == "reduce-scatter" { print $3, $4, $5, $6 }' "$work/out")
ag=$(awk '$1 == "DP" && $2 == "all-gather" { print $3, $4, $5, $6 }' "$work/out")
if [ "$status" -eq 0 ] && [ "$rs" = "12 12 508416 508416" ] && [ "$ag" = "12 12 508416 508416" ]; then
    ok "ZeRO-1 traffic: 12 reduce-scatters and 12 all-gathers of 508416 bytes, by hand"
else
    not_ok "ZeRO-1 traffic: reduce-scatter '$rs', all-gather '$ag'"
fi
tt 2 $cfg --dp 2 --zero 2 --micro-batches 4
rs=$(awk '$1 == "DP" && $2 == "reduce-scatter" { print $3, $4, $5, $6 }' "$work/out")
if [ "$status" -eq 0 ] && [ "$rs" = "48 48 2033664 2033664" ]; then
    ok "ZeRO-2 traffic: 48 reduce-scatters of 2033664 bytes (4 micro-batches), by hand"
else
    not_ok "ZeRO-2 traffic: reduce-scatter '$rs'"
fi

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

# Resume across: a ZeRO-1 checkpoint at step 2 (of 4) continued without ZeRO
# on tp 2 x pp 2 gives the same file as the zero-0 checkpoint continued the
# same way; and continued with ZeRO-1 on its own layout, the same file as the
# uninterrupted ZeRO-1 run. The reverse: a zero-0 checkpoint continued under
# ZeRO-2 on dp 4 passes the oracle.
run4="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4 --micro-batches 2"
tt 2 $run4 --dp 2 --zero 1 --stop-at 2 --save "$work/a2.st"
sa=$status
tt 2 $run4 --dp 2 --zero 0 --stop-at 2 --save "$work/b2.st"
sb=$status
tt 4 $run4 --tp 2 --pp 2 --dp 1 --resume "$work/a2.st" --save "$work/a4.st"
sa4=$status
tt 4 $run4 --tp 2 --pp 2 --dp 1 --resume "$work/b2.st" --save "$work/b4.st"
if [ "$sa$sb$sa4$status" = 0000 ] && cmp -s "$work/a4.st" "$work/b4.st"; then
    ok "a ZeRO-1 checkpoint resumed without ZeRO on tp 2 x pp 2 equals the zero-0 one resumed"
else
    not_ok "ZeRO checkpoint resumed on tp2 pp2: exits $sa $sb $sa4 $status, or the files differ"
fi
tt 2 $run4 --dp 2 --zero 1 --resume "$work/a2.st" --save "$work/c4.st"
sc=$status
tt 2 $run4 --dp 2 --zero 1 --save "$work/d4.st"
if [ "$sc$status" = 00 ] && cmp -s "$work/c4.st" "$work/d4.st"; then
    ok "ZeRO-1: 2 steps + resume to 4 is byte-identical to 4 steps in one run"
else
    not_ok "ZeRO-1 resume on its own layout: exits $sc $status, or the files differ"
fi
cfg="$run4"
must_say="resumed from '$work/b2.st' at step 2"
validate_case 4 --dp 4 --zero 2 --resume "$work/b2.st"

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
rs=$(awk '$1 == "DP" && $2 == "reduce-scatter" { print $3, $4, $5, $6 }' "$work/out")
ag=$(awk '$1 == "DP" && $2 == "all-gather" { print $3, $4, $5, $6 }' "$work/out")
if [ "$status" -eq 0 ] && [ "$rs" = "48 48 2033664 2033664" ] && [ "$ag" = "96 96 4067328 4067328" ]; then
    ok "ZeRO-3 traffic: 96 all-gathers of 4067328 bytes and 48 reduce-scatters, by hand"
else
    not_ok "ZeRO-3 traffic: reduce-scatter '$rs', all-gather '$ag'"
fi
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
# Resume both ways: a ZeRO-3 checkpoint at step 2 continued without ZeRO on
# tp 2 x pp 2 equals the zero-0 one continued so (b4 above: the zero-0
# checkpoint is the same file); continued with ZeRO-3 on its own layout,
# the uninterrupted ZeRO-3 run; and a zero-0 checkpoint passes the oracle
# continued under ZeRO-3 on dp 4.
run3="--layers 2 --dim 32 --heads 4 --seq 16 --batch 16 --steps 4 --warmup 2 --sample-len 0 --quiet --eval-every 0 --eval-windows 4 --micro-batches 1"
tt 2 $run3 --dp 2 --zero 3 --stop-at 2 --save "$work/e2.st"
se=$status
tt 2 $run3 --dp 2 --zero 0 --stop-at 2 --save "$work/f2.st"
sf=$status
tt 4 $run3 --tp 2 --pp 2 --dp 1 --resume "$work/e2.st" --save "$work/e4.st"
se4=$status
tt 4 $run3 --tp 2 --pp 2 --dp 1 --resume "$work/f2.st" --save "$work/f4.st"
if [ "$se$sf$se4$status" = 0000 ] && cmp -s "$work/e2.st" "$work/f2.st" &&
    cmp -s "$work/e4.st" "$work/f4.st"; then
    ok "a ZeRO-3 checkpoint (the zero-0 bytes) resumed without ZeRO on tp 2 x pp 2 equals the zero-0 one resumed"
else
    not_ok "ZeRO-3 checkpoint resumed on tp2 pp2: exits $se $sf $se4 $status, or the files differ"
fi
tt 2 $run3 --dp 2 --zero 3 --resume "$work/e2.st" --save "$work/g4.st"
sg=$status
tt 2 $run3 --dp 2 --zero 3 --save "$work/h4.st"
if [ "$sg$status" = 00 ] && cmp -s "$work/g4.st" "$work/h4.st"; then
    ok "ZeRO-3: 2 steps + resume to 4 is byte-identical to 4 steps in one run"
else
    not_ok "ZeRO-3 resume on its own layout: exits $sg $status, or the files differ"
fi
cfg="$run3"
must_say="resumed from '$work/f2.st' at step 2"
validate_case 4 --dp 4 --zero 3 --micro-batches 2 --resume "$work/f2.st"

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

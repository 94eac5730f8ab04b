#!/bin/sh
# tests/test_zero.sh - ZeRO (--zero 1, 2) against the unsharded oracle and
# against the run without ZeRO: --validate passes on several layouts and
# schedules with 1 and 4 micro-batches (worst errors printed), the DP
# replicas' weights end bit-identical, the traffic equals its formula, the
# checkpoints are the same bytes as without ZeRO where the sums are the same
# float operations, a ZeRO checkpoint resumes without ZeRO on another layout
# and the reverse, the oracle catches planted bugs under ZeRO, and the flag's
# wrong uses are one clear line.
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

# The oracle still sees a wrong gradient under ZeRO: a planted scaled slice
# (on the GPU that owns it) and a skipped reduction each fail validation.
cfg="--layers 2 --dim 32 --heads 4 --seq 16 --batch 8 --micro-batches 2 --steps 2 --validate --quiet --sample-len 0 --eval-every 0 --eval-windows 4"
for case in "grad-shard 1" "dp-no-sync 2"; do
    set -- $case
    tt_each 2 $cfg --dp 2 --zero "$2" --inject-bug "$1"
    statuses=$(cat "$work"/status.* 2>/dev/null | sort | uniq -c | awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }')
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
expect_error "--zero 4" 2 "zero" 2 --dp 2 --zero 4 --steps 1
expect_error "--zero 3 not built" 2 "zero 3" 2 --dp 2 --zero 3 --steps 1

finish

#!/bin/sh
# tests/test_tp.sh - tensor parallelism against the unsharded oracle: tp = 2,
# 3, 4 and 6, with dp = 1 and dp = 2, pass --validate over several steps
# (tp 3 and 6 pad the 256-byte vocabulary to 258, so the oracle sees the
# padding's rows left out; the slices themselves are test_shards.sh's), as
# does --tp-mlp gather;
# the TP copies of replicated tensors stay identical; and the TP traffic equals
# the closed form of doc/communication.md, checked here by hand for one case.
. "$TT_SRCDIR/testlib.sh"

# 12 heads of size 4: every tp above divides them.
cfg="--layers 2 --dim 48 --heads 12 --seq 16 --batch 12 --micro-batches 1 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0"

must_say="TP copies of the replicated tensors bit-identical: yes"

for tp in 2 3 4 6; do
    validate_case "$tp" --tp "$tp" --dp 1
done
validate_case 4 --tp 2 --dp 2 --micro-batches 2
validate_case 6 --tp 3 --dp 2
validate_case 2 --tp 2 --tp-mlp gather
validate_case 4 --tp 2 --dp 2 --tp-mlp gather --micro-batches 3

# The closed form by hand, tp 2, dp 1, one micro-batch, L = 2, C = 48,
# B = 12, T = 16 (tokens n = 192), 3 steps:
#   all-reduce calls per step = 4 per block x 2 + embedding 1 + lm_head 1 +
#   cross-entropy 3 = 13; bytes per step = 4 x (4 x 2 x n x C + n x C + n x C
#   + 3 n) = 4 x (73728 + 9216 + 9216 + 576) = 370944.
#   Over 3 steps: 39 calls, 1112832 bytes.
# With --tp-mlp gather, per block and step an all-gather and a reduce-scatter
# of n x 4C floats: 4 x 192 x 192 = 147456 bytes each, x 2 blocks x 3 steps.
tt 2 $cfg --tp 2
row=$(awk '$1 == "TP" && $2 == "all-reduce" { print $3, $5 }' "$work/out")
[ "$row" = "39 1112832" ] && ok "TP all-reduce by hand: 39 calls, 1112832 bytes" || not_ok "TP all-reduce: '$row'"
tt 2 $cfg --tp 2 --tp-mlp gather
ag=$(awk '$1 == "TP" && $2 == "all-gather" { print $3, $5 }' "$work/out")
rs=$(awk '$1 == "TP" && $2 == "reduce-scatter" { print $3, $5 }' "$work/out")
ar=$(awk '$1 == "TP" && $2 == "all-reduce" { print $3, $5 }' "$work/out")
if [ "$ag" = "6 884736" ] && [ "$rs" = "6 884736" ] && [ "$ar" = "39 1112832" ]; then
    ok "--tp-mlp gather adds an all-gather and a reduce-scatter of 884736 bytes each"
else
    not_ok "--tp-mlp gather traffic: all-gather '$ag', reduce-scatter '$rs', all-reduce '$ar'"
fi

# Layout errors that TP adds.
expect_error "tp does not divide heads" 2 "tp 4 must divide --heads 6" 4 --heads 6 --dim 48 --tp 4
finish

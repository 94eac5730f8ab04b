#!/bin/sh
# tests/test_sp.sh - sequence parallelism (--sequence-parallel, design.md section
# 10, Korthikanti et al. 2022): --validate passes with tp 2 and 3, with pp
# (interleaved), dp, ZeRO-1 and both recomputations; the eval loss and the
# sample equal the run without it (eval and generation batches whose tokens
# tp does not divide are padded); the activation memory and the TP traffic
# equal the figures worked by hand below; a checkpoint written with it resumes
# without it on another layout; a planted fault (the LayerNorm gradients not
# summed over TP) is caught by the oracle; and the wrong uses are one line.
. "$TT_SRCDIR/testlib.sh"

# 12 heads of size 4; 12 sequences of 16 tokens in one micro-batch (192 rows,
# divisible by 2 and 3); 7 eval windows of 16 tokens (112 rows: tp 3 pads).
cfg="--layers 2 --dim 48 --heads 12 --seq 16 --batch 12 --micro-batches 1 --steps 3 --warmup 2 --sample-len 12 --eval-windows 7 --quiet --eval-every 0"
must_say="TP copies of the replicated tensors bit-identical: yes"

# The reference: tp 2 without sequence parallelism.
tt 2 $cfg --tp 2 --report memory
cp "$work/out" "$work/plain.out"
[ "$status" -eq 0 ] || not_ok "tp 2 without --sequence-parallel: exit $status"

validate_case 2 --tp 2 --sequence-parallel --report memory --save "$work/sp.st"
cp "$work/out" "$work/sp.out"
validate_case 3 --tp 3 --sequence-parallel
cp "$work/out" "$work/sp3.out"
validate_case 4 --tp 2 --pp 2 --schedule interleaved --layers 4 --micro-batches 2 --sequence-parallel
validate_case 4 --tp 2 --dp 2 --zero 1 --micro-batches 2 --sequence-parallel
validate_case 2 --tp 2 --recompute full --sequence-parallel
validate_case 2 --tp 2 --recompute selective --sequence-parallel

# Eval and generation are the same computation, whatever tp and the padding.
eval_of() { sed -n 's/.*eval loss \([0-9.]*\) on.*/\1/p' "$1"; }
sample_of() { grep '^sample:' "$1"; }
for f in sp sp3; do
    if [ -n "$(eval_of "$work/plain.out")" ] && [ "$(eval_of "$work/$f.out")" = "$(eval_of "$work/plain.out")" ] &&
       [ -n "$(sample_of "$work/plain.out")" ] && [ "$(sample_of "$work/$f.out")" = "$(sample_of "$work/plain.out")" ]; then
        ok "$f: eval loss $(eval_of "$work/$f.out") and the sample equal the run without sequence parallelism"
    else
        not_ok "$f: eval loss '$(eval_of "$work/$f.out")' vs '$(eval_of "$work/plain.out")', or the sample differs"
    fi
done

# Memory by hand, gpu0 of tp 2: N = 192 rows, Ns = 96 kept, C = 48. Each of
# the 2 blocks keeps x_in, ln1, x_mid, ln2 (C each) and 4 means/rstds on Ns
# rows instead of N: 2 x 96 x (4 x 48 + 4) = 37632 floats; the chunk output
# 96 x 48 = 4608; ln_f's output, mean and rstd 96 x 50 = 4800: 47040 floats =
# 188160 bytes less activation. The backward's scratch grows by a gathered
# buffer (N C = 9216), a scattered one (Ns C = 4608) and the LayerNorm
# gradients (4 C = 192): 14016 floats = 56064 bytes more errors. The report
# is in MiB with 3 decimals.
col() { awk -v c="$2" '$1 == "gpu0(dp0,pp0,tp0)" && NF >= 8 && $2 !~ /%$/ { print $c }' "$1"; }
check_mem() {
    got=$(awk -v a="$(col "$work/plain.out" "$2")" -v b="$(col "$work/sp.out" "$2")" 'BEGIN { printf "%+.3f", b - a }')
    want=$(awk -v s="$3" 'BEGIN { printf "%+.3f", s / 1048576 }')
    if awk -v g="$got" -v w="$want" 'BEGIN { d = g - w; exit !(d < 0.0015 && d > -0.0015) }'; then
        ok "sequence parallelism changes $1 by $got MiB on gpu0, by hand $want"
    else
        not_ok "$1 changes by $got MiB on gpu0, by hand $want"
    fi
}
check_mem activations 3 -188160
check_mem errors 4 56064

# Traffic by hand (the same tp 2 run, 3 steps, n = 192 tokens, C = 48, L = 2;
# doc/communication.md): per step, all-gathers 6 per block (ln1, ln2; the
# gradients of proj's and fc2's outputs; ln1, ln2 again) + the embedding's
# backward + ln_f's output twice = 15 of n C floats: 15 x 36864 = 552960
# bytes; reduce-scatters 4 per block + the embedding + lm_head's input
# gradient = 10: 368640 bytes; all-reduces: 3 of the cross-entropy (3 n
# floats), 1 per block of the LayerNorm gradients (4 C), 1 of ln_f's (2 C):
# 6 calls, 4 x (576 + 384 + 96) = 4224 bytes.
row() { awk -v op="$2" '$1 == "TP" && $2 == op { print $3, $5, $NF }' "$1"; }
ag=$(row "$work/sp.out" all-gather) rs=$(row "$work/sp.out" reduce-scatter) ar=$(row "$work/sp.out" all-reduce)
if [ "$ag" = "45 1658880 829440" ] && [ "$rs" = "30 1105920 552960" ] && [ "$ar" = "18 12672 12672" ]; then
    ok "TP traffic by hand: all-gather 45 calls 1658880 bytes, reduce-scatter 30 / 1105920, all-reduce 18 / 12672"
else
    not_ok "TP traffic: all-gather '$ag', reduce-scatter '$rs', all-reduce '$ar'"
fi
# In ring bytes the collectives that replace the all-reduces move what those
# did (370944 bytes a step, 1112832 over 3, without sequence parallelism); the two gathers
# again per block and ln_f's (5 x 18432 bytes) and the LayerNorm gradients'
# all-reduces (1920 bytes) come on top: 3 x (370944 + 92160 + 1920).
ring=$(awk '$1 == "TP" { s += $NF } END { print s }' "$work/sp.out")
plain=$(awk '$1 == "TP" { s += $NF } END { print s }' "$work/plain.out")
[ "$plain" = 1112832 ] && [ "$ring" = 1395072 ] \
    && ok "ring bytes: $ring over 3 steps = 3 x (the replaced all-reduces' 370944 + 92160 + 1920)" \
    || not_ok "ring bytes: $ring with, $plain per step without"

# A checkpoint written with sequence parallelism resumes without it on
# another layout (tp 1 x pp 2), and the oracle agrees.
must_say="resumed from '$work/sp.st' at step 3"
validate_case 2 --pp 2 --tp 1 --steps 5 --resume "$work/sp.st"
must_say=

# A planted fault: the LayerNorm gradients of each rank's tokens not summed
# over TP. The oracle must name a wrong gradient (exit 1).
tt 2 $cfg --tp 2 --sequence-parallel --validate --inject-bug sp-no-ln-allreduce
if [ "$status" -eq 1 ] && grep -q "validation FAILED: gradient of \(ln_f\|blocks\.[0-9]*\.ln[12]\)" "$work/out"; then
    ok "planted sp-no-ln-allreduce: $(grep 'validation FAILED' "$work/out")"
else
    not_ok "planted sp-no-ln-allreduce not caught (exit $status)"
fi

small="--layers 2 --dim 48 --heads 12 --seq 16 --steps 1 --sample-len 0 --quiet"
expect_error "--sequence-parallel with tp 1" 2 "needs tensor parallelism.*tp 1" 1 $small --sequence-parallel
expect_error "--sequence-parallel with 16 tokens a micro-batch on tp 3" 2 \
    "tokens of a micro-batch .* = 16) divisible by tp 3" 3 $small --tp 3 --batch 4 --micro-batches 4 --sequence-parallel
expect_error "--sequence-parallel with --tp-mlp gather" 2 "does not combine with --tp-mlp gather" 2 \
    $small --tp 2 --tp-mlp gather --sequence-parallel
finish

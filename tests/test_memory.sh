#!/bin/sh
# tests/test_memory.sh - the memory account and the out-of-memory error.
# The account of a tiny single-GPU config is checked against the formulas of
# doc/memory.md worked out here by hand; a GPU over its --gpu-mem budget stops
# every rank with exit 1 and one line naming it; the same model fits when it
# is split over more GPUs.
. "$TT_SRCDIR/testlib.sh"

# 1 GPU, L=1, C=16, NH=2, T=8, B=2, one micro-batch: N = 16 tokens, V = 256.
tt 1 --layers 1 --dim 16 --heads 2 --seq 8 --batch 2 --micro-batches 1 --steps 1 --quiet --sample-len 0 --eval-every 0 --report memory
# P = tok 256*16 + pos 8*16 + block 12*16*16+13*16 + ln_f 32 + lm_head 256*16
#   = 4096 + 128 + 3280 + 32 + 4096 = 11632
# weights 4P = 46528; gradients 4P; optimizer 8P = 93056.
# slot: block 4N(4C+4+4C+2*4C) + 4*B*NH*T*T = 4*16*(64+4+64+128) + 4*2*2*64 = 16640+1024
#       = 17664; chunk output 4NC = 1024; ints 8N = 128; head 4N(C+2) + 8N*V + 4N
#       = 1152 + 32768 + 64 = 33984: 52800 bytes, one slot (1 stage).
# errors: 4N(2C + max(C,Hl,Vl) + 4C + Hl) + 4T^2 = 64*(32+256+64+64) + 256 = 26880.
# total 46528*2 + 93056 + 52800 + 26880 = 265792 bytes.
row=$(awk '$1 ~ /^gpu0\(/ && NF >= 8 { print $2, $3, $4, $5, $6, $7, $8 }' "$work/out")
want=$(awk 'BEGIN { m = 1048576; printf "%.3f %.3f %.3f %.3f %.3f %.3f %.3f", 46528/m, 52800/m, 26880/m, 46528/m, 0, 93056/m, 265792/m }')
[ "$status" -eq 0 ] && [ "$row" = "$want" ] && ok "account by hand: $row MB" || not_ok "account '$row', by hand '$want'"

# Interleaved 1F1B, pp 2, v 2, m 4, L 4 (one block per chunk; stage 0 holds
# blocks 0 and 2 and the embeddings), C 48, NH 4, T 16, B 8: N = 2 x 16 = 32.
# By Megatron's warm-up, stage 0 holds 2 (p-1) + (v-1) p + 1 = 5 chunk
# micro-batches at once (chunk 0's four peak while chunk 1 holds one); each
# chunk keeping its own most would be 4 + 2 = 6. Both chunks are one block
# without the head, so one slot serves either:
#   slot = 4 [N (4C + 4 + 4C + 2 * 4C) + B NH T^2 + NC + 2N]
#        = 4 [32 * 772 + 2 * 4 * 256 + 1536 + 64] = 113408 bytes; x 5 = 567040.
# Peak: P = 256*48 + 16*48 + 2 (12*48^2 + 13*48) = 69600 floats, 16P = 1113600;
# errors 4 [N (2C + max(C, 4C) + 4C + 4C) + T^2] = 87040 (V = 256 > 4C is the
# widest scratch only on the stage with the loss); transfers: 8 activations
# sent, 8 gradients received, 4 sent, each 4 N C = 6144 bytes: 122880.
# Total 1113600 + 567040 + 87040 + 122880 = 1890560 bytes.
il="--layers 4 --dim 48 --heads 4 --seq 16 --batch 8 --micro-batches 4 --pp 2 --schedule interleaved --steps 1 --quiet --sample-len 0 --eval-every 0 --no-spot-check"
tt 2 $il --report memory
act=$(awk '$1 ~ /^gpu0\(/ && NF >= 8 && $2 !~ /%$/ { print $3 }' "$work/out")
want=$(awk 'BEGIN { printf "%.3f", 567040 / 1048576 }')
[ "$status" -eq 0 ] && [ "$act" = "$want" ] && ok "interleaved stage 0 holds 5 chunk micro-batches at once: $act MiB" ||
    not_ok "interleaved stage 0 activations '$act' MiB, by hand $want (5 slots of 113408 bytes)"
# Stage 1 holds chunks 1 and 3 (the head's): 2 (p-1-1) + (v-1) p + 1 = 3
# chunk micro-batches at once, one of them chunk 3's (its backward follows
# its forward), so three slots and one set of the head's buffers, lent to
# whichever slot holds chunk 3: ln_f 4 N (C + 2), the logits and their
# softmax 8 N V, the losses 4 N = 6400 + 65536 + 128 = 72064 bytes;
# 3 x 113408 + 72064 = 412288 (a whole head slot beside three others would be
# 525696, a slot more than the schedule ever holds).
act=$(awk '$1 ~ /^gpu1\(/ && NF >= 8 && $2 !~ /%$/ { print $3 }' "$work/out")
want=$(awk 'BEGIN { printf "%.3f", 412288 / 1048576 }')
[ "$status" -eq 0 ] && [ "$act" = "$want" ] && ok "interleaved last stage holds 3 chunk micro-batches, one head: $act MiB" ||
    not_ok "interleaved stage 1 activations '$act' MiB, by hand $want (3 slots of 113408 bytes and a head of 72064)"
tt 2 $il --gpu-mem 1890560
fits=$status
tt 2 $il --gpu-mem 1890559
[ "$fits" -eq 0 ] && [ "$status" -eq 1 ] && grep -q "is out of memory" "$work/err" && ok "interleaved: peak 1890560 bytes by hand fits, one byte less does not" ||
    not_ok "interleaved with --gpu-mem 1890560: exit $fits (want 0); 1890559: exit $status (want 1, out of memory)"

# zb-v's turn: the same model, pp 2, M 4, chunks in a V (stage 0 holds
# chunks 0 and 3, stage 1 chunks 1 and 2). Comm buffers, each 4 N C = 6144
# bytes, one per send to the other stage and per gradient received, per
# micro-batch: stage 0 sends chunk 0's activation and chunk 3's gradient and
# receives chunk 0's gradient, 3 x 4 = 12 buffers, 73728 bytes; stage 1
# receives the gradients of chunks 1 and 2 and sends chunk 1's gradient and
# chunk 2's activation to stage 0, 4 x 4 = 16, 98304 bytes. Chunk 1 to chunk 2
# and back stays on stage 1: no buffer of its own (the activation is copied
# from slot to slot, the gradient written into chunk 1's receive buffer), not
# the 24 buffers (147456 bytes) it would keep if its two sends to itself per
# micro-batch held 8 more.
tt 2 --layers 4 --dim 48 --heads 4 --seq 16 --batch 8 --micro-batches 4 --pp 2 --schedule zb-v --steps 1 --quiet --sample-len 0 --eval-every 0 --no-spot-check --report memory
c0=$(awk '$1 ~ /^gpu0\(/ && NF >= 8 && $2 !~ /%$/ { print $6 }' "$work/out")
c1=$(awk '$1 ~ /^gpu1\(/ && NF >= 8 && $2 !~ /%$/ { print $6 }' "$work/out")
want=$(awk 'BEGIN { printf "%.3f %.3f", 73728 / 1048576, 98304 / 1048576 }')
[ "$status" -eq 0 ] && [ "$c0 $c1" = "$want" ] && ok "zb-v: comm buffers $c0 and $c1 MiB, the V's turn holds the gradient's only" ||
    not_ok "zb-v comm buffers '$c0 $c1' MiB, by hand $want (12 and 16 buffers of 6144 bytes)"

# Chunks of different blocks: pp 3, v 2, M 6, blocks per chunk 1,1,1,2,2,1,
# so stage 1 holds chunk 1 (one block) and chunk 4 (two), same dims and
# N = (12 / 6) x 16 = 32. Its warm-up forwards 2 (p-1-1) + (v-1) p = 5
# micro-batches, p = 3 of chunk 1 then 2 of chunk 4, and the first steady
# forward a third of chunk 4: 6 micro-batches held, 3 + 3 x 2 = 9 blocks
# (then each backward frees what the next forward takes). A block is
# 4 [N (4C + 4 + 4C + 2 * 4C) + B NH T^2] = 4 [32 * 772 + 2 * 4 * 256] = 107008
# bytes, a slot's own 4 (N C + 2 N) = 6400: 6 x 6400 + 9 x 107008 = 1001472
# (6 one-block and 3 two-block slots, each chunk's own most, would be 1341696).
tt 3 --layers 8 --dim 48 --heads 4 --seq 16 --batch 12 --micro-batches 6 --pp 3 --schedule interleaved --stage-layers 1,1,1,2,2,1 --steps 1 --quiet --sample-len 0 --eval-every 0 --no-spot-check --report memory
act=$(awk '$1 ~ /^gpu1\(/ && NF >= 8 && $2 !~ /%$/ { print $3 }' "$work/out")
want=$(awk 'BEGIN { printf "%.3f", 1001472 / 1048576 }')
[ "$status" -eq 0 ] && [ "$act" = "$want" ] && ok "uneven chunks: stage 1 holds 6 micro-batches, 9 blocks: $act MiB" ||
    not_ok "uneven chunks: stage 1 activations '$act' MiB, by hand $want (6 slots of 6400 bytes, 9 blocks of 107008)"

# Over budget: exit 1 on every rank, one line naming the GPU.
expect_error "out of memory on 1 GPU" 1 "gpu0(dp0,pp0,tp0) is out of memory: allocating" 1 --gpu-mem 16M --steps 1 --quiet --sample-len 0
expect_error "out of memory on 6 GPUs" 1 "^tiny_transformer: gpu0(dp0,pp0,tp0) is out of memory" 6 --tp 2 --pp 3 --gpu-mem 16M --steps 1 --quiet --sample-len 0
# The same model fits on tp 2 x pp 3 x dp 2, and the earlier a stage, the
# more it holds (1F1B: stage s keeps p - s micro-batches in flight).
tt 12 --gpu-mem 16M --steps 1 --quiet --sample-len 0 --eval-every 0 --report memory
peak() { awk -v g="^gpu$1[(]" '$1 ~ g && NF >= 8 && $2 !~ /%$/ { print $8 }' "$work/out"; }
first=$(peak 0) middle=$(peak 4) last=$(peak 8)
if [ "$status" -eq 0 ] &&
   awk -v a="$first" -v b="$middle" -v c="$last" 'BEGIN { exit !(a + 0 > b + 0 && b + 0 > c + 0 && c + 0 > 0 && a + 0 < 16) }'; then
    ok "tp2 pp3 dp2 trains in 16M: peaks by stage $first > $middle > $last MB"
else
    not_ok "12 GPUs with 16M: exit $status, peaks by stage '$first', '$middle', '$last'"
fi
finish

#!/bin/sh
# tests/test_shards.sh - --report shards tells what every virtual GPU holds.
# tp 2 pp 2 on a 2-block model of width 48 (H = 4 x 48 = 192), checked line
# by line against slices worked out from the Megatron split (DESIGN section
# 4): q, k, v and fc1 are column-parallel, so TP rank r holds rows
# [r n/2, (r+1) n/2) of their [out, in] weights and of their biases; proj
# and fc2 are row-parallel, so rank r holds the same range of columns; the
# embedding and the head are vocabulary-parallel (256 rows cut in two);
# LayerNorms, biases after a row-parallel layer and pos_emb are whole. The
# balanced split puts block 0 and the embeddings on stage 0, block 1 and
# ln_f, lm_head on stage 1. Then tp 3 (256 rows in 3: 86 each, the last
# with 2 padding rows) and DP replicas: identical tables summarised in one
# line, and under ZeRO (each replica owns another piece) not.
. "$TT_SRCDIR/testlib.sh"

small="--layers 2 --dim 48 --heads 4 --seq 16 --batch 8 --micro-batches 2 --steps 0 --sample-len 0 --no-spot-check"

# section GPU: the lines of GPU's table (after its header, up to the next GPU).
section() {
    awk -v gpu="$1" 'index($0, gpu ":") == 1 { on = 1; next } /^gpu[0-9]/ || /^$/ { on = 0 } on && /^  / { $1 = $1; print }' "$work/out"
}

tt 4 $small --tp 2 --pp 2 --report shards
cat > "$work/want0" <<'W'
tok_emb.weight [256,48] rows 0:128
pos_emb.weight [16,48] whole
blocks.0.ln1.weight [48] whole
blocks.0.ln1.bias [48] whole
blocks.0.attn.q.weight [48,48] rows 0:24
blocks.0.attn.q.bias [48] 0:24
blocks.0.attn.k.weight [48,48] rows 0:24
blocks.0.attn.k.bias [48] 0:24
blocks.0.attn.v.weight [48,48] rows 0:24
blocks.0.attn.v.bias [48] 0:24
blocks.0.attn.proj.weight [48,48] cols 0:24
blocks.0.attn.proj.bias [48] whole
blocks.0.ln2.weight [48] whole
blocks.0.ln2.bias [48] whole
blocks.0.mlp.fc1.weight [192,48] rows 0:96
blocks.0.mlp.fc1.bias [192] 0:96
blocks.0.mlp.fc2.weight [48,192] cols 0:96
blocks.0.mlp.fc2.bias [48] whole
W
cat > "$work/want3" <<'W'
blocks.1.ln1.weight [48] whole
blocks.1.ln1.bias [48] whole
blocks.1.attn.q.weight [48,48] rows 24:48
blocks.1.attn.q.bias [48] 24:48
blocks.1.attn.k.weight [48,48] rows 24:48
blocks.1.attn.k.bias [48] 24:48
blocks.1.attn.v.weight [48,48] rows 24:48
blocks.1.attn.v.bias [48] 24:48
blocks.1.attn.proj.weight [48,48] cols 24:48
blocks.1.attn.proj.bias [48] whole
blocks.1.ln2.weight [48] whole
blocks.1.ln2.bias [48] whole
blocks.1.mlp.fc1.weight [192,48] rows 96:192
blocks.1.mlp.fc1.bias [192] 96:192
blocks.1.mlp.fc2.weight [48,192] cols 96:192
blocks.1.mlp.fc2.bias [48] whole
ln_f.weight [48] whole
ln_f.bias [48] whole
lm_head.weight [256,48] rows 128:256
W
if [ "$status" -ne 0 ]; then
    not_ok "tp 2 pp 2 --report shards exited $status"
else
    section 'gpu0(dp0,pp0,tp0)' > "$work/got0"
    section 'gpu3(dp0,pp1,tp1)' > "$work/got3"
    cmp -s "$work/want0" "$work/got0" && ok "gpu0 (stage 0, TP rank 0): every slice as worked out" ||
        { diff "$work/want0" "$work/got0"; not_ok "gpu0's slices"; }
    cmp -s "$work/want3" "$work/got3" && ok "gpu3 (stage 1, TP rank 1): every slice as worked out" ||
        { diff "$work/want3" "$work/got3"; not_ok "gpu3's slices"; }
    # gpu1 is gpu0's TP peer: the same names and shapes, the other halves.
    section 'gpu1(dp0,pp0,tp1)' > "$work/got1"
    sed -e 's/rows 0:128$/rows 128:256/' -e 's/ 0:24$/ 24:48/' -e 's/ 0:96$/ 96:192/' "$work/want0" > "$work/want1"
    cmp -s "$work/want1" "$work/got1" && ok "gpu1: the other half of every split tensor" ||
        { diff "$work/want1" "$work/got1"; not_ok "gpu1's slices"; }
    # The header counts the tensors listed under it.
    n0=$(grep -c . "$work/got0")
    grep -q "^gpu0(dp0,pp0,tp0): $n0 tensors, " "$work/out" && ok "header counts $n0 tensors" || not_ok "gpu0 header"
fi

# tp 3: 256 vocabulary rows in 3 slices of 86 (258 padded), the last 172:256
# and 2 rows of padding.
tt 3 $small --tp 3 --heads 6 --report shards
if [ "$status" -eq 0 ] && section 'gpu2(dp0,pp0,tp2)' | grep -qx 'tok_emb.weight \[256,48\] rows 172:256 + 2 padding rows' &&
    section 'gpu1(dp0,pp0,tp1)' | grep -qx 'lm_head.weight \[256,48\] rows 86:172'; then
    ok "tp 3: vocabulary slices of 86 rows, the last with 2 padding rows"
else
    not_ok "tp 3 vocabulary slices"
fi

# DP: the replica says it holds what dp0 holds; under ZeRO it owns another
# piece of every unit, so the two tables differ and both are printed.
tt 2 $small --dp 2 --report shards
if [ "$status" -eq 0 ] && grep -qx 'gpu1(dp1,pp0,tp0) holds the same as gpu0(dp0,pp0,tp0)' "$work/out"; then
    ok "dp 2: the replica summarised in one line"
else
    not_ok "dp 2 summary"
fi
tt 2 $small --dp 2 --zero 1 --report shards
if [ "$status" -eq 0 ] && ! grep -q 'holds the same' "$work/out" &&
    grep -q '^gpu1(dp1,pp0,tp0): .* tensors, .*ZeRO 1: the Adam moments of piece 1 (of 2) of each unit' "$work/out" &&
    [ "$(section 'gpu1(dp1,pp0,tp0)' | grep -c .)" -eq "$(section 'gpu0(dp0,pp0,tp0)' | grep -c .)" ]; then
    ok "--zero 1: the replicas own different pieces, both tables printed"
else
    not_ok "--zero 1 tables"
fi
finish

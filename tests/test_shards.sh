#!/bin/sh
# tests/test_shards.sh - --report shards tells what every virtual GPU holds.
# tp 2 pp 2 on a 2-block model of width 48 (H = 4 x 48 = 192), checked line
# by line against slices worked out from the Megatron split (doc/design.md section
# 4): q, k, v and fc1 are column-parallel, so TP rank r holds rows
# [r n/2, (r+1) n/2) of their [out, in] weights and of their biases; proj
# and fc2 are row-parallel, so rank r holds the same range of columns; the
# embedding and the head are vocabulary-parallel (256 rows cut in two);
# LayerNorms, biases after a row-parallel layer and pos_emb are whole. The
# balanced split puts block 0 and the embeddings on stage 0, block 1 and
# ln_f, lm_head on stage 1. Then tp 3 (256 rows in 3: 86 each, the last
# with 2 padding rows) and DP replicas: identical tables summarised in one
# line, and under ZeRO (each replica owns another piece) not; the pieces
# named on each line partition every tensor over its DP group.
. "$TT_SRCDIR/testlib.sh"

small="--layers 2 --dim 48 --heads 4 --seq 16 --batch 8 --micro-batches 2 --steps 0 --sample-len 0 --no-spot-check"

# section GPU: the lines of GPU's table (after its header, up to the next GPU).
section() {
    awk -v gpu="$1" 'index($0, gpu ":") == 1 { on = 1; next } /^gpu[0-9]/ || /^$/ { on = 0 } on && /^  / { $1 = $1; print }' "$work/out"
}

# block_want B R: the 16 tensors of block B as TP rank R of 2 holds them
# (C = 48, H = 192): rows [24R, 24R + 24) of q, k, v and their biases, rows
# [96R, 96R + 96) of fc1 and its bias, the same ranges of columns of proj and
# fc2, the LayerNorms and the biases after proj and fc2 whole.
block_want() {
    b=blocks.$1 c="$(($2 * 24)):$(($2 * 24 + 24))" h="$(($2 * 96)):$(($2 * 96 + 96))"
    printf '%s\n' "$b.ln1.weight [48] whole" "$b.ln1.bias [48] whole"
    for n in q k v; do
        printf '%s\n' "$b.attn.$n.weight [48,48] rows $c" "$b.attn.$n.bias [48] $c"
    done
    printf '%s\n' "$b.attn.proj.weight [48,48] cols $c" "$b.attn.proj.bias [48] whole" \
        "$b.ln2.weight [48] whole" "$b.ln2.bias [48] whole" \
        "$b.mlp.fc1.weight [192,48] rows $h" "$b.mlp.fc1.bias [192] $h" \
        "$b.mlp.fc2.weight [48,192] cols $h" "$b.mlp.fc2.bias [48] whole"
}

tt 4 $small --tp 2 --pp 2 --report shards
# Stage 0 begins with the embeddings: tok_emb's half of the vocabulary,
# pos_emb whole. Stage 1 ends with ln_f whole and lm_head's half.
{ echo "tok_emb.weight [256,48] rows 0:128"; echo "pos_emb.weight [16,48] whole"; block_want 0 0; } > "$work/want0"
{ echo "tok_emb.weight [256,48] rows 128:256"; echo "pos_emb.weight [16,48] whole"; block_want 0 1; } > "$work/want1"
{ block_want 1 0; printf '%s\n' "ln_f.weight [48] whole" "ln_f.bias [48] whole" "lm_head.weight [256,48] rows 0:128"; } > "$work/want2"
{ block_want 1 1; printf '%s\n' "ln_f.weight [48] whole" "ln_f.bias [48] whole" "lm_head.weight [256,48] rows 128:256"; } > "$work/want3"
if [ "$status" -ne 0 ]; then
    not_ok "tp 2 pp 2 --report shards exited $status"
else
    # GPU | its table's header | what it holds: all four GPUs. gpu1 is
    # gpu0's TP peer: the same names and shapes, the other halves.
    while IFS='|' read -r n gpu what; do
        section "$gpu" > "$work/got$n"
        cmp -s "$work/want$n" "$work/got$n" && ok "gpu$n ($what): every slice as worked out" ||
            { diff "$work/want$n" "$work/got$n"; not_ok "gpu$n's slices"; }
    done <<'T'
0|gpu0(dp0,pp0,tp0)|stage 0, TP rank 0
2|gpu2(dp0,pp1,tp0)|stage 1, TP rank 0
3|gpu3(dp0,pp1,tp1)|stage 1, TP rank 1
1|gpu1(dp0,pp0,tp1)|stage 0, TP rank 1: the other half of every split tensor
T
    # The header counts the tensors listed under it.
    n0=$(grep -c . "$work/got0")
    grep -q "^gpu0(dp0,pp0,tp0): $n0 tensors, " "$work/out" && ok "header counts $n0 tensors" || not_ok "gpu0 header"
fi

# Single lines a run must print, whole. tp 3: 256 vocabulary rows in 3
# slices of 86 (258 padded), the last 172:256 and 2 rows of padding. DP: the
# replica says it holds what dp0 holds. A row with the run of the row before
# reads that run's output.
# Columns: what | ranks | the layout after $small | where: a GPU's table
# (section), or - for the whole output | the line.
last=""
while IFS='|' read -r what np args where line <&3; do
    [ "$np $args" = "$last" ] || tt "$np" $small $args --report shards
    last="$np $args"
    if [ "$where" = - ]; then cat "$work/out"; else section "$where"; fi > "$work/got"
    if [ "$status" -eq 0 ] && grep -qxF -- "$line" "$work/got"; then
        ok "$what: $line"
    else
        not_ok "$what: exit $status, no line '$line'"
    fi
done 3<<'T'
tp 3: the last vocabulary slice, with 2 padding rows|3|--tp 3 --heads 6|gpu2(dp0,pp0,tp2)|tok_emb.weight [256,48] rows 172:256 + 2 padding rows
tp 3: the middle slice of 86 rows|3|--tp 3 --heads 6|gpu1(dp0,pp0,tp1)|lm_head.weight [256,48] rows 86:172
dp 2: the replica summarised in one line|2|--dp 2|-|gpu1(dp1,pp0,tp0) holds the same as gpu0(dp0,pp0,tp0)
T

# Under ZeRO each replica owns another piece of every unit, so the two
# tables differ and both are printed.
tt 2 $small --dp 2 --zero 1 --report shards
if [ "$status" -eq 0 ] && ! grep -q 'holds the same' "$work/out" &&
    grep -q '^gpu1(dp1,pp0,tp0): .* tensors, .*ZeRO 1: the Adam moments of piece 1 (of 2) of each unit' "$work/out" &&
    [ "$(section 'gpu1(dp1,pp0,tp0)' | grep -c .)" -eq "$(section 'gpu0(dp0,pp0,tp0)' | grep -c .)" ]; then
    ok "--zero 1: the replicas own different pieces, both tables printed"
else
    not_ok "--zero 1 tables"
fi

# Each tensor line ends in the piece of it the GPU owns under ZeRO. Over a
# DP group the pieces of every tensor are disjoint and cover it exactly (a
# partition, checked from the lines alone), and a GPU's pieces add up to its
# announced share less the units' padding (at most dp - 1 floats for each
# of the L + 2 units: embeddings, blocks, head). ZeRO 3 says the weights are
# partitioned too. Over 3 (pieces cut across tensors) and under tp 2.
for case in "3|--dp 3 --batch 6 --micro-batches 2 --zero 3|3" "4|--tp 2 --dp 2 --zero 1|2"; do
    IFS='|' read -r np flags dp <<EOC
$case
EOC
    tt "$np" $small $flags --report shards
    if [ "$status" -ne 0 ]; then
        not_ok "ZeRO pieces ($flags): exit $status"
        continue
    fi
    if python3 - "$work/out" "$dp" 2 <<'PY'
import re, sys
text, dp, L = open(sys.argv[1]).read(), int(sys.argv[2]), int(sys.argv[3])
gpus, bad = {}, []
for block in re.split(r"\n(?=gpu\d)", text[text.index("tensors per virtual GPU"):]):
    head = re.match(r"gpu(\d+)\(dp(\d+),pp(\d+),tp(\d+)\): \d+ tensors, \d+ floats in its TP/PP shard; ZeRO (\d): (.*?) of piece (\d+) \(of (\d+)\) of each unit only \((\d+) floats\)", block)
    if not head:
        continue
    g, d, p_, t, stage, what, piece, parts, share = head.groups()
    if int(piece) != int(d) or int(parts) != dp:
        bad.append("gpu%s: piece %s of %s" % (g, piece, parts))
    if (int(stage) == 3) != what.startswith("the weights"):
        bad.append("gpu%s: ZeRO %s keeps '%s'" % (g, stage, what))
    owned = 0
    for m in re.finditer(r"^  (\S+) .*; ZeRO piece (?:(\d+):(\d+)|none) of (\d+)$", block, re.M):
        name, a, b, n = m.group(1), m.group(2), m.group(3), int(m.group(4))
        rng = (int(a), int(b)) if a is not None else None
        gpus.setdefault((p_, t, name), []).append((rng, n))
        owned += rng[1] - rng[0] if rng else 0
    if not 0 <= int(share) - owned <= (dp - 1) * (L + 2):
        bad.append("gpu%s: owns %d floats of tensors, announced %s" % (g, owned, share))
for key, pieces in gpus.items():
    n = {p[1] for p in pieces}
    got = sorted(p[0] for p in pieces if p[0])
    cover = len(pieces) == dp and len(n) == 1 and got and got[0][0] == 0 and got[-1][1] == n.pop() \
        and all(x[1] == y[0] for x, y in zip(got, got[1:])) and all(a < b for a, b in got)
    if not cover:
        bad.append("%s: pieces %s do not partition it" % (key, pieces))
if not gpus:
    bad.append("no ZeRO pieces found")
print("; ".join(bad[:3]))
sys.exit(1 if bad else 0)
PY
    then
        ok "ZeRO pieces ($flags): every tensor's pieces partition it over the DP group"
    else
        not_ok "ZeRO pieces ($flags)"
    fi
done
finish

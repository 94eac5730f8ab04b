#!/bin/sh
# tests/test_plan.sh - the planner (--plan, doc/design.md section 11) against the
# papers (its agreement with the emulator's runs: tests/test_plan_runs.sh):
#  1. Parameters of GPT shapes equal the closed form 12Lh^2 + 13Lh + (2V+s)h
#     + 2h of this model (untied lm_head, biases) exactly, and GPT-3 175B's
#     count is within 1% of 175e9.
#  2. ZeRO (Rajbhandari et al. 2020), Psi = 7.5e9, Nd = 64, mixed precision:
#     model states per GPU 120 / 31.4 / 16.6 / 1.9 GB for stages 0-3 (1%,
#     2.5% for stage 3, whose 1.9 GB rounds 16 Psi / Nd = 1.875);
#     the fp32 account (4+4+8) fails the stage-1 figure (planted fault).
#  3. Korthikanti et al. 2022, Table 2 without its dropout terms (this model
#     has no dropout): activations of GPT-3 on one stage equal
#     L x sbh(8 + 24/t + 2as/ht), sbh(32/t + 2as/ht) with SP, sbh(32/t)
#     selective with SP, 2sbh full, plus the loss's 4sbv/t (1e-9); the tp 8
#     forms against a tp 1 plan fail (planted fault).
#  4. Narayanan et al. 2021: GPT-3 175B, 300e9 tokens, 1024 GPUs at 140
#     TFLOP/s with free links and full recomputation: their 8TP/(nX) estimate
#     is about 34 days; the plan is within 5% of it, a plan at 160 TFLOP/s
#     is not (planted fault).
#     The seed book's power example: 25,200 MWh and $2.52M within 0.1%
#     (doc/seed-book-cluster.json); dgx-a100's own watts, PUE and price miss.
#  5. Against the emulator's runs: tests/test_plan_runs.sh.
#  7. Narayanan et al. 2021, Table 1: the planner's count less the untied
#     lm_head and ln_f (V h + 2 h) is their 12lh^2 (1 + 13/12h + (V+s)/12lhl)
#     exactly, and rounds to the table's 1.7B ... 1008.0B.
#  8. Their PTD-P run of GPT-3 175B on 1024 A100s (tp 8, pp 8, dp 16,
#     micro-batch 1, 96 micro-batches; and pp 16, dp 8): stage 0's model
#     states are ZeRO's 16, 4 + 12/Nd, 2 + 14/Nd, 16/Nd bytes per parameter of
#     its shard (counted by hand from Megatron's partition), its activations
#     Korthikanti et al.'s L layers of Table 2 under 1F1B and
#     L (1 + (p-1)/(p v)) layers interleaved; the sum of each chunk's own
#     peak (p v + p chunk micro-batches) fails (planted fault).
#  9. The bubble of those layouts with equal chunk costs and free links:
#     (p-1)/(m+p-1) for 1F1B and GPipe, (p-1)/(v m+p-1) interleaved (1e-9).
# 10. FLOPs: Narayanan et al.'s eq. 3, 72 B s l h^2 (1 + s/6h + V/12lh), and
#     with full recomputation 96 B s l h^2 (1 + s/6h + V/16lh) (lm_head is
#     not run again), selective + 4 B s^2 h l; 4/3 of eq. 3 fails (planted).
# 11. The DP all-reduce in --dp-bucket buckets of SIZE bytes: with 2-byte
#     gradients (mixed) ceil(2 Psi_s / SIZE) of them, with fp32 ceil(4 Psi_s
#     / SIZE), each 2(dp-1) latencies.
# 12. Figures a plan lacks are null in its JSON (no --train-tokens: days,
#     energy, cost; fixed chunk costs: MFU, which the table shows as "-");
#     the cluster's peaks keep a cluster file's names (planted: a plan with
#     --train-tokens). Each candidate names its chunks per stage
#     (virtual_stages), as the table does.
#  6. Bad input is refused with one line (--vocab without --plan, --plan
#     without --gpus, a GPU count no split takes (with the nearest that do),
#     a pinned size that does not divide them, pinned flags that training
#     refuses together (in training's words), an unwritable
#     --plan-json); under mpirun rank 0 plans once and all ranks exit 0.
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

gpt3="--layers 96 --dim 12288 --heads 96 --seq 2048 --vocab 51200 --batch 1536"

# plan NAME ARGS...: a pinned plan on one process, its JSON in $work/NAME.json
# (an earlier plan's is removed first: a plan that fails leaves no JSON, and
# the check reading it fails).
plan() {
    name=$1
    shift
    rm -f "$work/$name.json"
    "$TT_BIN" --plan --plan-json "$work/$name.json" "$@" >"$work/out" 2>"$work/err"
    status=$?
}

# py CHECK-NAME PYTHON: runs PYTHON (which prints a message and exits 0 or 1).
py() {
    what=$1
    if msg=$(python3 -c "$2" "$work" 2>&1); then ok "$what: $msg"; else not_ok "$what: $msg"; fi
}

# planted NAME FUNCTION ARGS...: runs a check function that must fail.
planted() {
    what=$1
    shift
    ("$@") >"$work/fault"
    if grep -q "^NOT OK" "$work/fault"; then ok "planted fault, $what: the check fails"; else not_ok "planted fault, $what: the check passed"; fi
}

# 1. Parameter counts.
for shape in "96 12288 96 2048 51200" "32 4096 32 2048 51200" "48 1600 25 1024 50257" "12 768 12 1024 50257"; do
    set -- $shape
    plan params --layers $1 --dim $2 --heads $3 --seq $4 --vocab $5 --batch 8 --gpus 1 --tp 1 --pp 1 --dp 1 --zero 0 --recompute none --micro-batches 1 --precision mixed
    py "parameters of L$1 h$2" "
import json, sys
L, h, a, s, V = $1, $2, $3, $4, $5
P = json.load(open(sys.argv[1] + '/params.json'))['model']['parameters']
want = 12*L*h*h + 13*L*h + (2*V + s)*h + 2*h
print('%d, closed form %d' % (P, want)); sys.exit(P != want)"
done
plan params $gpt3 --gpus 1 --tp 1 --pp 1 --dp 1 --zero 0 --recompute none --micro-batches 1
py "GPT-3 175B within 1% of 175e9" "
import json, sys
P = json.load(open(sys.argv[1] + '/params.json'))['model']['parameters']
print('%.4g (%+.2f%%)' % (P, 100*(P/175e9 - 1))); sys.exit(abs(P/175e9 - 1) > 0.01)"

# 2. ZeRO's 7.5B example: bytes of model states per parameter x 7.5e9. One
#    plan with --zero not given holds all four stages.
zero_check() {
    py "$1" "
import json, sys
want = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}
j = json.load(open(sys.argv[1] + '/zero.json'))
by = {c['zero']: c for c in j['candidates']}
for z in range(4):
    m = by[z]['memory_bytes']
    gb = (m['weights'] + m['gradients'] + m['optimizer']) / j['model']['parameters'] * 7.5e9 / 1e9
    err = gb / want[z] - 1
    print('stage %d %.2f GB (paper %g, %+.1f%%)' % (z, gb, want[z], 100*err), end='; ')
    if abs(err) > (0.025 if z == 3 else 0.01): sys.exit(1)"
}
zero_plan="--layers 4 --dim 256 --heads 4 --seq 64 --batch 64 --gpus 64 --tp 1 --pp 1 --dp 64 --recompute none --micro-batches 1"
plan zero $zero_plan --precision mixed
zero_check "ZeRO paper's 7.5B on 64 GPUs"
plan zero $zero_plan --precision fp32
planted "the fp32 account against ZeRO's figures" zero_check "ZeRO with fp32"

# 3. Korthikanti et al. Table 2, one stage (pp 1, one micro-batch in flight):
#    one plan per tp, recomputation and SP enumerated. Table 2 counts dropout,
#    which this model has none of (design.md section 4): its two s b h masks
#    (after attention and after the MLP) and, of the 5 a s^2 b / t, attention's
#    mask (1) and dropout output (2) go, leaving the softmax's output (2). So
#    10 + 24/t becomes 8 + 24/t, 34/t with SP 32/t, and 5as/ht 2as/ht; full
#    recomputation keeps the block's input, 2 s b h, as before. (A python
#    function, pasted into the two checks that use it; s b h is theirs.)
table2_py="def table2(rec, sp):
    if rec == 'full': return 2*sbh/t if sp else 2*sbh
    kept = 32/t if sp else 8 + 24/t
    return sbh*kept if rec == 'selective' else sbh*(kept + 2*a*s/(h*t))"
# act_check T: the candidates of act.json against Table 2's forms for tp T.
act_check() {
    py "activations, tp $1: every recomputation, with and without SP" "
import json, sys
t = $1
s, b, h, a, L, V = 2048, 1, 12288, 96, 96, 51200
sbh = s*b*h
$table2_py
cs = json.load(open(sys.argv[1] + '/act.json'))['candidates']
bad = 0
for c in cs:
    rec, sp = c['recompute'], c['sequence_parallel']
    # full recomputation rebuilds one block's activations at a time
    want = L*table2(rec, sp) + 4*s*b*V/t + (table2('none', sp) if rec == 'full' else 0)
    got = c['memory_bytes']['activations']
    print('%s%s %.4g GB (form %.4g)' % (rec, ' sp' if sp else '', got/1e9, want/1e9), end='; ')
    bad |= abs(got/want - 1) > 1e-9
sys.exit(bad or len(cs) != (6 if t > 1 else 3))"
}
for t in 8 1; do
    plan act $gpt3 --gpus $t --tp $t --pp 1 --dp 1 --zero 0 --micro-batches 1536 --precision mixed
    act_check $t
done
planted "Table 2 for tp 8 against a tp 1 plan" act_check 8

# 4. Narayanan et al.'s training time.
printf '{"based_on": "dgx-a100", "peak_flops": 200e12, "gemm_efficiency": 0.7, "memory_bandwidth": 1e15,
 "nvlink_bandwidth": 0, "nvlink_latency": 0, "network_bandwidth": 0, "network_latency": 0, "gpu_memory_bytes": 1e15}\n' > "$work/x140.json"
days_check() {
    py "GPT-3 175B, 300B tokens, 1024 GPUs at 140 TFLOP/s: about 34 days" "
import json, sys
c = json.load(open(sys.argv[1] + '/days.json'))['candidates'][0]
days = c['train_seconds'] / 86400
paper = 8 * 300e9 * 175e9 / (1024 * 140e12) / 86400
print('%.2f days, 8TP/(nX) = %.2f days (%+.1f%%)' % (days, paper, 100*(days/paper - 1))); sys.exit(abs(days/paper - 1) > 0.05)"
}
days_plan="$gpt3 --gpus 1024 --tp 8 --pp 1 --dp 128 --zero 0 --recompute full --micro-batches 1 --precision mixed --train-tokens 300e9"
plan days $days_plan --cluster "$work/x140.json"
days_check
printf '{"based_on": "dgx-a100", "peak_flops": 200e12, "gemm_efficiency": 0.8, "memory_bandwidth": 1e15,
 "nvlink_bandwidth": 0, "nvlink_latency": 0, "network_bandwidth": 0, "network_latency": 0, "gpu_memory_bytes": 1e15}\n' > "$work/x160.json"
plan days $days_plan --cluster "$work/x160.json"
planted "GPUs at 160 TFLOP/s" days_check

# 4b. The seed book's power example (doc/planner.md, worked example 1): 50,000
#     GPUs at 350 W for two months at $0.10 per kWh: 25,200 MWh, $2.52M.
seed_check() {
    py "the seed book's 50,000 GPUs for two months" "
import json, sys
c = json.load(open(sys.argv[1] + '/seed.json'))['candidates'][0]
mwh, usd, days = c['energy_kwh'] / 1e3, c['cost'], c['train_seconds'] / 86400
want = 350 * 50000 * 60 * 24 / 1e6
print('%.2f days, %.1f MWh (book %.0f), \$%.0f (book \$2.52M)' % (days, mwh, want, usd))
sys.exit(abs(mwh / want - 1) > 1e-3 or abs(usd / 2.52e6 - 1) > 1e-3)"
}
plan seed --cluster "$TT_SRCDIR/../doc/seed-book-cluster.json" --gpus 50000 --tp 1 --pp 1 --dp 50000 --zero 0 --recompute none --micro-batches 1 --batch 50000 --train-tokens 5.5296e12
seed_check
printf '{"based_on": "dgx-a100", "fixed_forward": 1, "fixed_backward": 2, "nvlink_bandwidth": 0, "nvlink_latency": 0,
 "network_bandwidth": 0, "network_latency": 0}\n' > "$work/a100-watts.json"
plan seed --cluster "$work/a100-watts.json" --gpus 50000 --tp 1 --pp 1 --dp 50000 --zero 0 --recompute none --micro-batches 1 --batch 50000 --train-tokens 5.5296e12
planted "dgx-a100's own 400 W, PUE 1.2 and \$0.15" seed_check

# 5b. The "Best:" line names the layout the JSON ranks first (not the second).
best_check() {
    py "the Best line names JSON candidate $1" "
import json, sys
c = json.load(open(sys.argv[1] + '/best.json'))['candidates'][$1]
want = 'Best: #1, tp %d pp %d dp %d, ZeRO %d, recompute %s' % (c['tp'], c['pp'], c['dp'], c['zero'], c['recompute'])
line = [l for l in open(sys.argv[1] + '/out') if l.startswith('Best:')]
print(line[0].strip() if line else 'no Best line')
sys.exit(len(line) != 1 or not line[0].startswith(want + ','))"
}
plan best --gpus 8
best_check 0
planted "the second candidate" best_check 1

# 6b. One GPU, a model whose activations do not fit 64 MiB in one
#     micro-batch: gradient accumulation (more micro-batches, the same FLOPs)
#     fits without recomputing anything, so the best plan micro-batches and
#     recomputes nothing (the planner once tried one micro-batch on one stage
#     and recommended full recomputation, a third more compute). The emulator
#     agrees: that layout fits --gpu-mem 64M, one micro-batch does not.
one="--layers 8 --dim 128 --heads 8"
plan one --gpus 1 $one
py "one GPU: the best micro-batches and recomputes nothing" "
import json, sys
c = json.load(open(sys.argv[1] + '/one.json'))['candidates']
b = c[0]
print('best: m %d, recompute %s, fits %s' % (b['micro_batches'], b['recompute'], b['fits']))
sys.exit(not (b['fits'] and b['recompute'] == 'none' and b['micro_batches'] > 1))"
m_best=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['candidates'][0]['micro_batches'])" "$work/one.json")
tt 1 $one --micro-batches "$m_best" --gpu-mem 64M --steps 1 --sample-len 0 --eval-every 0 --quiet
[ "$status" -eq 0 ] && ok "... and a run of it fits 64 MiB (m $m_best)" || not_ok "the best one-GPU plan, run: exit $status"
tt 1 $one --micro-batches 1 --gpu-mem 64M --steps 1 --sample-len 0 --eval-every 0 --quiet
[ "$status" -eq 1 ] && grep -q "out of memory" "$work/err" "$work/out" && ok "... where one micro-batch runs out of memory" ||
    not_ok "one micro-batch on 64 MiB: exit $status"

# 6c. Why a row loses, against #1: on 8 GPUs with the same layout pinned but
#     ZeRO, ZeRO 0 runs AdamW on 4 times the parameters of ZeRO 1 (dp 4) with
#     the same pipeline, so the optimizer is what it loses by; the reason
#     once took the row's own recompute share, or named the DP all-reduce.
plan why --gpus 8 $one --tp 1 --pp 2 --dp 4 --recompute none --micro-batches 6 --schedule 1f1b
# The JSON carries the parts: AdamW is memory-bound on the same pipeline,
# so ZeRO 0's optimizer time (all P parameters) is dp = 4 times ZeRO 1's
# (P / 4 each), and the ZeRO 0 row's why names it.
py "ZeRO 0's optimizer time is dp = 4 times ZeRO 1's, in the JSON" "
import json, sys
c = json.load(open(sys.argv[1] + '/why.json'))['candidates']
z = {x['zero']: x for x in c if x['fits']}
r = z[0]['optimizer_seconds'] / z[1]['optimizer_seconds']
print('%.6f s / %.6f s = %.4f; why: %s' % (z[0]['optimizer_seconds'], z[1]['optimizer_seconds'], r, z[0]['why']))
sys.exit(abs(r - 4) > 1e-9 or not z[0]['why'].startswith('optimizer (+'))"
py "ZeRO 0 against ZeRO 1: the optimizer" "
import sys
rows = [l for l in open(sys.argv[1] + '/out') if ' z0 ' in l and 'yes' in l]
print(rows[0].rstrip()[-32:].strip() if rows else 'no ZeRO 0 row')
sys.exit(not rows or ' optimizer (+' not in rows[0] or ' best' in rows[0])"

# 7. Narayanan et al. 2021, Table 1 (V = 51200, s = 2048): heads, h, l and
#    the published billions. Their count ties lm_head to the embedding and has
#    no ln_f, so P - V h - 2 h = 12 l h^2 + 13 l h + (V + s) h.
for row in "24 2304 24 1.7" "32 3072 30 3.6" "32 4096 36 7.5" "48 6144 40 18.4" "64 8192 48 39.1" \
           "80 10240 60 76.1" "96 12288 80 145.6" "128 16384 96 310.1" "128 20480 105 529.6" \
           "160 25600 128 1008.0"; do
    set -- $row
    plan params --layers $3 --dim $2 --heads $1 --seq 2048 --vocab 51200 --batch 8 --gpus 1 --tp 1 --pp 1 --dp 1 --zero 0 --recompute none --micro-batches 1 --precision mixed
    py "Narayanan et al. Table 1, ${4}B (l $3, h $2)" "
import json, sys
a, h, l, pub, V, s = $1, $2, $3, $4, 51200, 2048
P = json.load(open(sys.argv[1] + '/params.json'))['model']['parameters']
theirs = 12*l*h*h + 13*l*h + (V + s)*h
print('%d - Vh - 2h = %d, theirs %d (%.1fB, table %.1fB)' % (P, P - V*h - 2*h, theirs, theirs/1e9, pub))
sys.exit(P - V*h - 2*h != theirs or round(theirs/1e9, 1) != pub)"
done

# 8. GPT-3 175B as Narayanan et al. ran it (mixed precision, micro-batch 1):
#    every recomputation, SP and ZeRO stage of each layout in one plan.
ptdp() { # NAME PP DP M SCHEDULE-FLAGS...
    name=$1 p=$2 d=$3 m=$4
    shift 4
    plan $name $gpt3 --gpus 1024 --cluster dgx-a100 --tp 8 --pp $p --dp $d --micro-batches $m --precision mixed "$@"
}
# ptdp_check NAME P DP V LAYERS-FORM: stage 0 of every candidate of NAME.json.
# Stage 0's shard, Megatron's partition at t = 8: the vocabulary-parallel
# embedding V h / t, the replicated positions s h, and l/p blocks of
# 12 h^2 / t weights, 7 h / t biases of the column-parallel q, k, v and fc1,
# and 6 h replicated (the row-parallel proj and fc2 biases, two LayerNorms).
ptdp_check() {
    py "PTD-P GPT-3 175B, tp 8 pp $2 dp $3 v $4: stage 0's ZeRO states and Table 2 activations ($5)" "
import json, sys
L, h, a, s, V, t, p, dp, v = 96, 12288, 96, 2048, 51200, 8, $2, $3, $4
Psi = V*h/t + s*h + L//p * (12*h*h/t + 7*h/t + 6*h)
zero = {0: (2, 2, 12), 1: (2, 2, 12/dp), 2: (2, 2/dp, 12/dp), 3: (2/dp, 2/dp, 12/dp)}
sbh = s*h
$table2_py
layers = $5
cs = json.load(open(sys.argv[1] + '/$1.json'))['candidates']
bad = 0
for c in cs:
    m, rec, sp = c['memory_bytes'], c['recompute'], c['sequence_parallel']
    want = [k*Psi for k in zero[c['zero']]]
    got = [m['weights'], m['gradients'], m['optimizer']]
    act = layers*table2(rec, sp) + (table2('none', sp) if rec == 'full' else 0)
    bad |= any(abs(g/w - 1) > 1e-9 for g, w in zip(got, want)) or abs(m['activations']/act - 1) > 1e-9
print('%d candidates; Psi_s %.4g; ZeRO 1: %.2f GiB of states; none: %.2f GiB of activations' % (len(cs), Psi,
      sum(k*Psi for k in zero[1])/2**30, layers*table2('none', 0)/2**30))
sys.exit(bad or len(cs) != 24)"
}
ptdp ptdp8 8 16 96 --schedule 1f1b
ptdp_check ptdp8 8 16 1 "L"
# A zero-bubble B keeps the linears' output gradients until W (buffers.c's
# SPLIT_W rows): dproj, dfc2, dln1, dln2 whole (4 s b h values) and dq, dk,
# dv, dfc1 split (7 s b h / t), 2 bytes each, on every layer-micro-batch
# held. zb-h1 holds p micro-batches like 1F1B; its worst GPU is the last
# stage, whose p micro-batches also hold the loss's logits 4 s b V / t.
# Against the fp32 account (the emulator's own, 4 bytes a value): half of
# it within 1% (its means and reciprocal deviations are the difference).
ptdp zbh1 8 16 96 --schedule zb-h1 --recompute none
cp "$work/zbh1.json" "$work/zbh1_mixed.json"
plan zbh1_fp32 $gpt3 --gpus 1024 --cluster dgx-a100 --tp 8 --pp 8 --dp 16 --micro-batches 96 --precision fp32 --schedule zb-h1 --recompute none
py "PTD-P GPT-3 175B, tp 8 pp 8 dp 16, zb-h1: B's kept gradients among the activations, half the fp32 account" "
import json, sys
h, t, a, s, V, L, p = 12288, 8, 96, 2048, 51200, 96, 8
sbh = s*h
layer = sbh*(8 + 24/t + 2*a*s/(h*t)) + sbh*(8 + 14/t)
want = L*layer + p*4*s*V/t
cs = json.load(open(sys.argv[1] + '/zbh1_mixed.json'))['candidates']
f32 = json.load(open(sys.argv[1] + '/zbh1_fp32.json'))['candidates']
got = [c['memory_bytes']['activations'] for c in cs]
half = [c['memory_bytes']['activations']/2 for c in f32]
print('%d candidates: %.4g GiB (form %.4g, half the fp32 account %.4g)' % (len(cs), got[0]/2**30, want/2**30, half[0]/2**30))
sys.exit(len(cs) == 0 or any(abs(g/want - 1) > 1e-9 for g in got) or any(abs(g/h2 - 1) > 0.01 for g in got for h2 in half))"
# ZeRO 3 gathers one unit at a time: each ZeRO 3 candidate's comm buffers are
# its ZeRO 0 twin's plus one 16-bit buffer of the largest unit, a block:
# 12 h^2 / t + 7 h / t + 6 h parameters (the embeddings, V h / t + s h, are
# smaller).
py "PTD-P GPT-3 175B, tp 8 pp 8 dp 16: ZeRO 3's gathered block among the comm buffers" "
import json, sys
h, t, V, s = 12288, 8, 51200, 2048
block = 12*h*h/t + 7*h/t + 6*h
assert block > V*h/t + s*h
cs = json.load(open(sys.argv[1] + '/ptdp8.json'))['candidates']
key = lambda c: (c['recompute'], c['sequence_parallel'])
z0 = {key(c): c['memory_bytes']['comm'] for c in cs if c['zero'] == 0}
z3 = [c for c in cs if c['zero'] == 3]
bad = [c for c in z3 if abs(c['memory_bytes']['comm'] - z0[key(c)] - 2*block) > 1]
print('%d ZeRO 3 candidates; the gathered block %.4g GiB' % (len(z3), 2*block/2**30))
sys.exit(len(z3) != 6 or len(bad) > 0)"
ptdp ptdp8 8 16 96 --schedule interleaved --virtual-stages 2
# Stage 0 holds p v + p - 1 chunk micro-batches of l/(p v) layers at once
# (Megatron's warm-up 2 (p-1) + (v-1) p, then one forward before the first
# backward): L (1 + (p-1)/(p v)) layers (Korthikanti et al. section 4.2.3).
ptdp_check ptdp8 8 16 2 "L*(1 + (p-1)/(p*v))"
planted "interleaved, each chunk's own peak summed (p v + p)" ptdp_check ptdp8 8 16 2 "L*(1 + 1/v)"
ptdp ptdp16 16 8 192 --schedule interleaved --virtual-stages 2
ptdp_check ptdp16 16 8 2 "L*(1 + (p-1)/(p*v))"

# 9. The same layouts' bubbles with every chunk 1 s forward and 2 s backward
#    and free links (the papers' assumption of equal stages); with the real
#    kernels the last stage's lm_head makes the others wait too, which the
#    plan's bubble (1 - mean busy / span) counts (doc/planner.md).
printf '{"based_on": "dgx-a100", "fixed_forward": 1, "fixed_backward": 2, "nvlink_bandwidth": 0, "nvlink_latency": 0,
 "network_bandwidth": 0, "network_latency": 0}\n' > "$work/equal.json"
bubble_check() { # NAME P M V SCHEDULE
    py "bubble, $5 p $2 m $3: (p-1)/(v m + p-1), v $4" "
import json, sys
p, m, v = $2, $3, $4
c = json.load(open(sys.argv[1] + '/$1.json'))['candidates'][0]
want = (p - 1)/(v*m + p - 1)
print('%s %.6f, formula %.6f' % (c['schedule'], c['bubble'], want))
sys.exit(c['schedule'] != '$5' or abs(c['bubble']/want - 1) > 1e-9)"
}
for row in "1f1b 8 16 96 1" "gpipe 8 16 96 1" "interleaved 8 16 96 2" "1f1b 16 8 192 1" "interleaved 16 8 192 2"; do
    set -- $row
    plan bub $gpt3 --gpus 1024 --cluster "$work/equal.json" --tp 8 --pp $2 --dp $3 --micro-batches $4 --schedule $1 --virtual-stages 2 --zero 0 --recompute none --precision mixed
    bubble_check bub $2 $4 $5 $1
done
planted "the interleaved plan against 1F1B's formula" bubble_check bub 16 192 1 interleaved

# 10. FLOPs per step of GPT-3 175B, B = 1536: eq. 3 of Narayanan et al.
#     (model), their 96 B s l h^2 (1 + s/6h + V/16lh) with full recomputation
#     (the blocks' forward again, lm_head not), and + 4 B s^2 h l selective
#     (Q K^T and P V again, 2 s^2 h each per sequence and layer).
flops_check() { # FULL-FORM
    py "FLOPs: eq. 3, and hardware FLOPs with recomputation ($1)" "
import json, sys
L, h, s, V, B = 96, 12288, 2048, 51200, 1536
F = 72*B*s*L*h*h*(1 + s/(6*h) + V/(12*L*h))
hw = {'none': F, 'selective': F + 4*B*s*s*h*L, 'full': $1}
bad = 0
seen = {}
for c in json.load(open(sys.argv[1] + '/flops.json'))['candidates']:
    bad |= abs(c['flops_per_step']/F - 1) > 1e-12 or abs(c['hardware_flops_per_step']/hw[c['recompute']] - 1) > 1e-12
    seen[c['recompute']] = c['hardware_flops_per_step']
print('model %.6g; ' % F + '; '.join('%s %.6g (want %.6g)' % (r, seen[r], hw[r]) for r in sorted(seen)))
sys.exit(bad or len(seen) != 3)"
}
plan flops $gpt3 --gpus 1024 --cluster dgx-a100 --tp 8 --pp 8 --dp 16 --micro-batches 96 --zero 1 --precision mixed
flops_check "96*B*s*L*h*h*(1 + s/(6*h) + V/(16*L*h))"
planted "full recomputation as 4/3 of eq. 3 (lm_head again)" flops_check "4*F/3"

# 11. The gradient all-reduce's buckets, on links of 1 ms and no bandwidth
#     limit: two --dp-bucket sizes differ by (nb1 - nb2) x 2 (dp-1) ms, nb =
#     ceil(bytes x Psi_s / SIZE) on the stage with the most (stage 0, Psi_s
#     as in 8: its embeddings outweigh lm_head's ln_f) and the rest equal.
printf '{"based_on": "dgx-a100", "nvlink_bandwidth": 0, "nvlink_latency": 0, "network_bandwidth": 0,
 "network_latency": 1e-3, "gpu_memory_bytes": 1e15}\n' > "$work/slow.json"
for prec in "mixed 2" "fp32 4"; do
    set -- $prec
    for size in 16M 64M; do
        plan bucket$size $gpt3 --gpus 1024 --cluster "$work/slow.json" --tp 8 --pp 8 --dp 16 --micro-batches 96 --zero 0 --recompute full --precision $1 --dp-bucket $size
    done
    py "DP buckets, $1: ceil($2 Psi_s / SIZE) all-reduces of 2 (dp-1) latencies" "
import json, sys, math
L, h, s, V, t, p, dp, el = 96, 12288, 2048, 51200, 8, 8, 16, $2
Psi = V*h/t + s*h + L//p * (12*h*h/t + 7*h/t + 6*h)
step = lambda n: json.load(open(sys.argv[1] + '/bucket%s.json' % n))['candidates'][0]['step_seconds']
nb = lambda size: math.ceil(el*Psi/size)
want = (nb(16*2**20) - nb(64*2**20)) * 2*(dp - 1) * 1e-3
got = step('16M') - step('64M')
print('%d and %d buckets: %.6f s apart (want %.6f)' % (nb(16*2**20), nb(64*2**20), got, want)); sys.exit(abs(got/want - 1) > 1e-9)"
done

# 12. Figures a plan does not have are null in the JSON, not 0 (which a
#     program would add up): days, energy and cost without --train-tokens,
#     and the MFU on a cluster of fixed chunk costs (section 9's equal.json),
#     whose table prints "-" and whose Best line says there is none, as its
#     runs print none. The cluster's peaks are named as in a cluster file.
absent_check() { # NAME TRAIN-NULL MFU-NULL
    py "$1: days, energy and cost null: $2, MFU null: $3" "
import json, sys
j = json.load(open(sys.argv[1] + '/$1.json'))
cs = j['candidates']
train = [all(c[k] is None for c in cs) for k in ('train_seconds', 'energy_kwh', 'cost')]
mfu = all(c['mfu'] is None for c in cs)
numbers = all(isinstance(c[k], (int, float)) for c in cs for k in ('step_seconds', 'bubble'))
print('%d candidates; train figures null %s, MFU null %s' % (len(cs), train, mfu))
sys.exit(train != [$2] * 3 or mfu != $3 or not numbers)"
}
plan absent --gpus 8 $one
absent_check absent True False
plan absent --gpus 8 $one --train-tokens 1e9
planted "a plan with --train-tokens" absent_check absent True False
plan absent --gpus 8 $one --cluster "$work/equal.json"
absent_check absent True True
if grep -q "no MFU (fixed chunk costs)" "$work/out" && ! grep -q "MFU [0-9]" "$work/out" &&
    awk '/^ 1  /' "$work/out" | grep -q "%      -  best$"; then
    ok "a fixed-cost cluster's table and Best line show no MFU"
else
    not_ok "a fixed-cost cluster's plan shows an MFU: $(grep '^ 1  \|^  step' "$work/out")"
fi
py "the JSON's cluster names both peaks as a cluster file does (dgx-a100: 312e12, 19.5e12 FP32)" "
import json, sys
c = json.load(open(sys.argv[1] + '/ptdp16.json'))['cluster']
print('peak_flops %g, peak_flops_fp32 %g' % (c['peak_flops'], c['peak_flops_fp32']))
sys.exit(c['peak_flops'] != 312e12 or c['peak_flops_fp32'] != 19.5e12)"

# 6. Bad input.
expect_error "--vocab without --plan" 2 "vocab is for --plan only" 1 --vocab 51200
# A flag only training uses was ignored by --plan: --gpu-mem 1K planned every
# layout as fitting. Each is refused by name, wherever it stands on the line.
for f in "--gpu-mem 1K" "--lr 0.1" "--stage-layers 1,3" "--tp-mlp gather" "--no-overlap" "--validate" "--steps 5" "--data $work/none.txt"; do
    expect_error "--plan with $f" 2 "^tiny_transformer: --plan trains nothing, so ${f%% *} would be ignored" 1 $f --plan --gpus 4 --layers 4 --dim 64 --heads 4
done
expect_error "--gpus without --plan" 2 "^tiny_transformer: --gpus is for --plan only" 1 --gpus 4
expect_error "--precision mixed without --plan" 2 "^tiny_transformer: --precision mixed is for --plan only" 1 --precision mixed
expect_error "--plan without --gpus" 2 "needs --gpus" 1 --plan
# The sizes' product in 64 bits: 4096 x 4096 x 1048576 wrapped to 0 in an int.
expect_error "--plan sizes past --gpus's range" 2 "^tiny_transformer: --plan: --tp 4096 x --pp 4096 x --dp 1048576 = 17592186044416 GPUs, more than the 16777216 --gpus allows" 1 --plan --tp 4096 --pp 4096 --dp 1048576
# A GPU count no split takes names the rules and the nearest counts that do.
# By hand, default model (12 heads, 6 layers, batch 24): 7 is prime, and
# neither tp 7 (12 heads), pp 7 (6 layers) nor dp 7 (batch 24) is allowed;
# 6 is dp 6 and 8 is dp 8.
# Past the largest count, 12 x 6 x 24 = 1728, only the one below (however far:
# it was searched within N/2 of N, one full count of splits per step, which
# took minutes at a million GPUs).
expect_error "--plan --gpus 1000003" 2 "^tiny_transformer: --plan: no layout of 1000003 GPUs divides the model and batch (.*; the nearest GPU count that can: 1728)$" 1 --plan --gpus 1000003
expect_error "--plan --gpus 7" 2 "^tiny_transformer: --plan: no layout of 7 GPUs divides the model and batch (tp must divide the 12 heads, pp be at most the 6 layers, dp divide the batch of 24; the nearest GPU counts that can: 6 and 8)$" 1 --plan --gpus 7
# ZeRO shards over the DP group: the planner recommended tp2 pp2 dp1 with
# --zero 3 pinned, a layout training refuses.
plan zero2 --gpus 4 --zero 2 --layers 4 --dim 64 --heads 4
py "--plan --zero 2 lists only layouts with a DP group" "
import json, sys
cs = json.load(open(sys.argv[1] + '/zero2.json'))['candidates']
dps = sorted({c['dp'] for c in cs})
print('%d layouts, dp %s, ZeRO %s' % (len(cs), dps, sorted({c['zero'] for c in cs})))
sys.exit(not cs or min(dps) < 2 or {c['zero'] for c in cs} != {2})"
# The planner enumerates ZeRO stages beside a pinned zero-bubble schedule;
# it proposed zb-v with ZeRO 3, which training refuses.
plan zbv --gpus 4 --schedule zb-v --layers 4 --dim 64 --heads 4
py "--plan --schedule zb-v lists no ZeRO 3" "
import json, sys
cs = json.load(open(sys.argv[1] + '/zbv.json'))['candidates']
z = sorted({c['zero'] for c in cs})
print('%d layouts, ZeRO stages %s' % (len(cs), z))
sys.exit(not cs or 3 in z)"
# The JSON names the chunks per stage the table shows ("interleaved v4"): it
# had no such field, and every interleaved plan read as v 2.
plan v4 --gpus 4 --schedule interleaved --virtual-stages 4 --layers 8 --dim 64 --heads 4
grep -q " interleaved v4 " "$work/out" || not_ok "--virtual-stages 4: the table shows no interleaved v4"
py "--plan --virtual-stages 4: every JSON candidate has virtual_stages 4" "
import json, sys
cs = json.load(open(sys.argv[1] + '/v4.json'))['candidates']
v = sorted({c.get('virtual_stages') for c in cs}, key=str)
print('%d layouts, virtual_stages %s' % (len(cs), v))
sys.exit(not cs or v != [4])"
plan v1 --gpus 4 --schedule 1f1b --layers 8 --dim 64 --heads 4
py "--plan --schedule 1f1b: every JSON candidate has virtual_stages 1" "
import json, sys
cs = json.load(open(sys.argv[1] + '/v1.json'))['candidates']
v = sorted({c.get('virtual_stages') for c in cs}, key=str)
print('%d layouts, virtual_stages %s' % (len(cs), v))
sys.exit(not cs or v != [1])"
# When no layout runs, the reason is the flags' conflict in training's words,
# not the depth or micro-batch count the enumeration happened to try last
# ("needs at least 2 pipeline stages (got pp = 1)" once).
expect_error "--plan --schedule zb-v --recompute full" 2 "^tiny_transformer: --plan: the zb-v schedule cannot run with --recompute:" 1 --plan --gpus 4 --schedule zb-v --recompute full
expect_error "--plan --schedule zb-v --zero 3" 2 "^tiny_transformer: --plan: the zb-v schedule cannot run with --zero 3 yet" 1 --plan --gpus 4 --schedule zb-v --zero 3
expect_error "--plan --schedule interleaved --virtual-stages 16" 2 "^tiny_transformer: --plan: 64 pipeline chunks need at least 64 blocks, but --layers is 6" 1 --plan --gpus 4 --schedule interleaved --virtual-stages 16
expect_error "--plan --zero 3 --dp 1" 2 "^tiny_transformer: --plan: --zero 3 needs a data-parallel group: ZeRO shards over the dp GPUs, and every layout" 1 --plan --gpus 4 --zero 3 --dp 1 --layers 4 --dim 64 --heads 4
# Pinned flags that training refuses together are refused in training's
# words (tt_config_check, the layout rules, tt_run_layout_check), not as "no
# layout of N GPUs divides the model and batch", which they all said once.
expect_error "--plan --tp 1 --sequence-parallel" 2 "^tiny_transformer: --plan: --sequence-parallel needs tensor parallelism: .*this layout has tp 1" 1 --plan --gpus 4 --tp 1 --sequence-parallel
expect_error "--plan --micro-batches 5" 2 "^tiny_transformer: --plan: --micro-batches 5 must divide --batch 24$" 1 --plan --gpus 4 --micro-batches 5
expect_error "--plan --dp 4 --micro-batches 4" 2 "^tiny_transformer: --plan: --micro-batches 4 must divide batch/dp = 24/4 = 6 (with dp 4: --micro-batches 1, 2, 3, 6)$" 1 --plan --gpus 4 --dp 4 --zero 3 --micro-batches 4
expect_error "--plan --sequence-parallel, odd tokens per micro-batch" 2 "^tiny_transformer: --plan: --sequence-parallel needs the tokens of a micro-batch (batch/dp/micro-batches x seq = 24/1/24 x 63 = 63) divisible by tp 2$" 1 --plan --gpus 4 --tp 2 --pp 2 --dp 1 --sequence-parallel --seq 63 --batch 24 --micro-batches 24
expect_error "--plan, pinned sizes that are not the GPUs" 2 "^tiny_transformer: --plan: --tp 2 x --pp 2 x --dp 1 = 4 GPUs, but --gpus is 8 (give --gpus 4, or leave one size open)$" 1 --plan --gpus 8 --tp 2 --pp 2 --dp 1
expect_error "--plan, two pinned sizes that do not divide the GPUs" 2 "^tiny_transformer: --plan: --tp 2 x --pp 4 = 8 GPUs does not divide --gpus 4$" 1 --plan --gpus 4 --tp 2 --pp 4
expect_error "--plan, a pinned tp that does not divide the GPUs, 2 ranks" 2 "--tp 3 does not divide --gpus 4" 2 --plan --gpus 4 --tp 3
# An output that cannot be written is a runtime error, 1, as --save into a
# missing directory is (test_outputs.sh); it used to be 2 here alone.
expect_error "--plan-json into a missing directory" 1 "does not exist" 1 --plan --gpus 4 --plan-json "$work/missing/x.json"
mkdir "$work/plandir"
expect_error "--plan-json onto a directory, 2 ranks" 1 "--plan-json: cannot write the plan '$work/plandir'" 2 --plan --gpus 4 --plan-json "$work/plandir"
# The planner trains nothing: a training run's file given with it was
# ignored (status 0, no log); it is refused on every rank.
expect_error "--plan with --log, 2 ranks" 2 "--plan trains nothing, so --log would be ignored" 2 --plan --gpus 4 --log "$work/never.csv"
[ ! -e "$work/never.csv" ] && ok "no log from the refused plan" || not_ok "the refused plan wrote a log"
printf 'step,loss\n1,2\n' > "$work/one.csv"
expect_error "--plan and --plot of logs together" 2 "--plan and --plot with --log CSVs are two runs" 1 --plan --gpus 4 --plot "$work/o.svg" "$work/one.csv"
# Under mpirun, rank 0 plans once and every rank leaves with its status.
tt_each 2 --plan --gpus 4
n=$(grep -c "^Plan:" "$work/out")
statuses=$(rank_statuses)
if [ "$n" -eq 1 ] && [ "$statuses" = "2x0" ]; then ok "--plan on 2 ranks: one plan, exit 0 on both"; else not_ok "--plan on 2 ranks: $n plans, statuses $statuses"; fi
finish

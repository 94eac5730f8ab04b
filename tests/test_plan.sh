#!/bin/sh
# tests/test_plan.sh - the planner (--plan, DESIGN section 11) against the
# papers and against the emulator's own runs:
#  1. Parameters of GPT shapes equal the closed form 12Lh^2 + 13Lh + (2V+s)h
#     + 2h of this model (untied lm_head, biases) exactly, and GPT-3 175B's
#     count is within 1% of 175e9.
#  2. ZeRO (Rajbhandari et al. 2020), Psi = 7.5e9, Nd = 64, mixed precision:
#     model states per GPU 120 / 31.4 / 16.6 / 1.9 GB for stages 0-3 (1%);
#     the fp32 account (4+4+8) fails the stage-1 figure (planted fault).
#  3. Korthikanti et al. 2022, Table 2: activations of GPT-3 on one stage equal
#     L x sbh(10 + 24/t + 5as/ht), sbh(34/t + 5as/ht) with SP, sbh(34/t)
#     selective with SP, 2sbh full, plus the loss's 4sbv/t (1e-9).
#  4. Narayanan et al. 2021: GPT-3 175B, 300e9 tokens, 1024 GPUs at 140
#     TFLOP/s with free links and full recomputation: their 8TP/(nX) estimate
#     is about 34 days; the plan is within 5% of it.
#     The seed book's power example: 25,200 MWh and $2.52M within 0.1%.
#  5. The emulator: for tp2 pp2, pp4, dp2 pp2 and tp2 dp2 on 4 classroom GPUs
#     and tp2 pp2 dp2 on 8 (two servers: the pipeline crosses the network),
#     and ZeRO 1 and 2 on pp2 dp2,
#     the planned worst-GPU memory equals --report memory's peak within 5% and
#     the planned step time the run's virtual step time (the CSV's ms) within
#     2%; a plan on a cluster with another network bandwidth, and a plan of
#     another schedule, miss (planted faults).
#  6. Bad input: --vocab without --plan is refused with one line.
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

gpt3="--layers 96 --dim 12288 --heads 96 --seq 2048 --vocab 51200 --batch 1536"

# plan NAME ARGS...: a pinned plan on one process, its JSON in $work/NAME.json.
plan() {
    name=$1
    shift
    "$TT_BIN" --plan --plan-json "$work/$name.json" "$@" >"$work/out" 2>"$work/err"
    status=$?
}

# py CHECK-NAME PYTHON: runs PYTHON (which prints a message and exits 0 or 1).
py() {
    what=$1
    if msg=$(python3 -c "$2" "$work" 2>&1); then ok "$what: $msg"; else not_ok "$what: $msg"; fi
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

# 2. ZeRO's 7.5B example: bytes of model states per parameter x 7.5e9.
zero_check() {
    py "$1" "
import json, sys
want = {0: 120, 1: 31.4, 2: 16.6, 3: 1.9}
for z in range(4):
    j = json.load(open(sys.argv[1] + '/zero%d.json' % z))
    c = j['candidates'][0]; m = c['memory_bytes']
    gb = (m['weights'] + m['gradients'] + m['optimizer']) / j['model']['parameters'] * 7.5e9 / 1e9
    err = gb / want[z] - 1
    print('stage %d %.2f GB (paper %g, %+.1f%%)' % (z, gb, want[z], 100*err), end='; ')
    if abs(err) > 0.025 if z == 3 else abs(err) > 0.01: sys.exit(1)"
}
for z in 0 1 2 3; do
    plan zero$z --layers 4 --dim 256 --heads 4 --seq 64 --batch 64 --gpus 64 --tp 1 --pp 1 --dp 64 --zero $z --recompute none --micro-batches 1 --precision mixed
done
zero_check "ZeRO paper's 7.5B on 64 GPUs"
for z in 0 1 2 3; do
    plan zero$z --layers 4 --dim 256 --heads 4 --seq 64 --batch 64 --gpus 64 --tp 1 --pp 1 --dp 64 --zero $z --recompute none --micro-batches 1 --precision fp32
done
(zero_check "planted fault: the fp32 account against ZeRO's figures") >"$work/fault"
if grep -q "^NOT OK" "$work/fault"; then ok "planted fault (fp32 account) fails the ZeRO check"; else not_ok "the ZeRO check passed the fp32 account"; fi

# 3. Korthikanti et al. Table 2, one stage (pp 1, one micro-batch in flight).
for c in "8 none 0" "8 none 1" "8 selective 1" "8 selective 0" "8 full 0" "1 none 0"; do
    set -- $c
    sp=""; [ "$3" = 1 ] && sp="--sequence-parallel"
    plan act $gpt3 --gpus $1 --tp $1 --pp 1 --dp 1 --zero 0 --recompute $2 $sp --micro-batches 1536 --precision mixed
    py "activations tp$1 $2 sp$3" "
import json, sys
t, rec, sp = $1, '$2', $3
s, b, h, a, L, V = 2048, 1, 12288, 96, 96, 51200
sbh = s*b*h
if rec == 'full': per = 2*sbh/t if sp else 2*sbh
elif rec == 'selective': per = sbh*34/t if sp else sbh*(10 + 24/t)
else: per = sbh*(34/t + 5*a*s/(h*t)) if sp else sbh*(10 + 24/t + 5*a*s/(h*t))
# full recomputation rebuilds one block's activations at a time
work = (sbh*(34/t + 5*a*s/(h*t)) if sp else sbh*(10 + 24/t + 5*a*s/(h*t))) if rec == 'full' else 0
want = L*per + 4*s*b*V/t + work
got = json.load(open(sys.argv[1] + '/act.json'))['candidates'][0]['memory_bytes']['activations']
print('%.4g GB, Table 2 form %.4g GB' % (got/1e9, want/1e9)); sys.exit(abs(got/want - 1) > 1e-9)"
done

# 4. Narayanan et al.'s training time.
printf '{"based_on": "dgx-a100", "peak_flops": 200e12, "gemm_efficiency": 0.7, "memory_bandwidth": 1e15,
 "nvlink_bandwidth": 0, "nvlink_latency": 0, "network_bandwidth": 0, "network_latency": 0, "gpu_memory_bytes": 1e15}\n' > "$work/x140.json"
plan days $gpt3 --cluster "$work/x140.json" --gpus 1024 --tp 8 --pp 1 --dp 128 --zero 0 --recompute full --micro-batches 1 --precision mixed --train-tokens 300e9
py "GPT-3 175B, 300B tokens, 1024 GPUs at 140 TFLOP/s: about 34 days" "
import json, sys
c = json.load(open(sys.argv[1] + '/days.json'))['candidates'][0]
days = c['train_seconds'] / 86400
paper = 8 * 300e9 * 175e9 / (1024 * 140e12) / 86400
print('%.2f days, 8TP/(nX) = %.2f days (%+.1f%%)' % (days, paper, 100*(days/paper - 1))); sys.exit(abs(days/paper - 1) > 0.05)"

# 4b. The seed book's power example (doc/planner.md, worked example 1): 50,000
#     GPUs at 350 W for two months at $0.10 per kWh: 25,200 MWh, $2.52M.
plan seed --cluster "$TT_SRCDIR/../doc/seed-book-cluster.json" --gpus 50000 --tp 1 --pp 1 --dp 50000 --zero 0 --recompute none --micro-batches 1 --batch 50000 --train-tokens 5.5296e12
py "the seed book's 50,000 GPUs for two months" "
import json, sys
c = json.load(open(sys.argv[1] + '/seed.json'))['candidates'][0]
mwh, usd, days = c['energy_kwh'] / 1e3, c['cost'], c['train_seconds'] / 86400
want = 350 * 50000 * 60 * 24 / 1e6
print('%.2f days, %.1f MWh (book %.0f), \$%.0f (book \$2.52M)' % (days, mwh, want, usd))
sys.exit(abs(mwh / want - 1) > 1e-3 or abs(usd / 2.52e6 - 1) > 1e-3)"

# 5. Against the emulator (4 virtual GPUs of classroom, one step).
run="--steps 1 --sample-len 0 --eval-every 0 --no-spot-check --report memory --quiet"
compare() { # NAME TOLERANCE-MEM TOLERANCE-TIME EXPECT(pass|fail)
    python3 - "$work" "$1" "$2" "$3" "$4" <<'PYEOF'
import json, sys, csv
w, name, tm, tt, expect = sys.argv[1:]
c = json.load(open(w + '/' + name + '.json'))['candidates'][0]
ms = float(list(csv.DictReader(open(w + '/log.csv')))[0]['ms'])
# The peak column of --report memory's table (MiB), the largest over the GPUs.
peak, table = 0.0, False
for line in open(w + '/run.out'):
    f = line.split()
    if line.startswith('memory per virtual GPU'):
        table = True
    elif table and not f:
        table = False
    elif table and f[0].startswith('gpu'):
        peak = max(peak, float(f[7]))
mem = c['memory_bytes']['total'] / 1048576
em, et = mem / peak - 1, c['step_seconds'] * 1e3 / ms - 1
print('memory planned %.3f MiB, measured %.3f (%+.2f%%); step planned %.3f ms, measured %.3f (%+.2f%%)' % (mem, peak, 100*em, c['step_seconds']*1e3, ms, 100*et))
good = abs(em) <= float(tm) and abs(et) <= float(tt)
sys.exit(0 if good == (expect == 'pass') else 1)
PYEOF
}
printf '{"based_on": "classroom", "nvlink_bandwidth": 20e6, "network_bandwidth": 10e6}\n' > "$work/slow.json"
for lay in "2 2 1 0" "1 4 1 0" "1 2 2 0" "2 1 2 0" "2 2 2 0" "1 2 2 1" "1 2 2 2"; do
    set -- $lay
    np=$(($1 * $2 * $3))
    $TT_MPIRUN -np $np "$TT_BIN" --tp $1 --pp $2 --dp $3 --zero $4 $run --log "$work/log.csv" >"$work/run.out" 2>"$work/err"
    plan p --gpus $np --tp $1 --pp $2 --dp $3 --zero $4 --recompute none --micro-batches 4 --schedule 1f1b
    if msg=$(compare p 0.05 0.02 pass); then ok "tp$1 pp$2 dp$3 zero$4: $msg"; else not_ok "tp$1 pp$2 dp$3 zero$4: $msg"; fi
    if [ "$lay" = "2 2 1 0" ]; then
        plan p --gpus 4 --tp $1 --pp $2 --dp $3 --zero 0 --recompute none --micro-batches 4 --schedule 1f1b --cluster "$work/slow.json"
        if msg=$(compare p 1 0.02 fail); then ok "planted fault, links 10x slower: $msg"; else not_ok "the time check passed a plan on another cluster: $msg"; fi
        plan p --gpus 4 --tp $1 --pp $2 --dp $3 --zero 0 --recompute none --micro-batches 4 --schedule gpipe
        if msg=$(compare p 0.05 1 fail); then ok "planted fault, gpipe's memory: $msg"; else not_ok "the memory check passed another schedule: $msg"; fi
    fi
done

# 6. Bad input.
expect_error "--vocab without --plan" 2 "vocab is for --plan only" 1 --vocab 51200
finish

#!/bin/sh
# tests/test_zb.sh - the zero-bubble schedule zb-h1 (each block's backward
# split into B, the input gradient, and W, the weight gradients) in whole
# runs:
#  1. --validate passes in a small layout matrix (pp2, pp4, tp2 pp2, pp2 dp2
#     with ZeRO 0, 1 and 2), the traffic equals the formulas;
#  2. B then W gives the same bits as the fused backward: a zb-h1 run writes
#     the same checkpoint as 1f1b, byte for byte (its W's run in micro-batch
#     order on every stage, so every gradient is summed in 1F1B's order);
#  3. with free links and fixed chunk costs F, B and W the bubble measured
#     from the --trace events equals doc/pipeline.md's formula
#     (p-1)(F + max(B-W, 0)) / (m(F+B+W) + (p-1)(F + max(B-W, 0))), and slow
#     links (a planted fault) move it away; the bubble table agrees;
#  4. --explain, --trace, --timeline and the report name B and W apart;
#  5. the memory account counts the output gradients B keeps for W;
#  6. what zb-h1 cannot do is refused with one line: --recompute, m < p;
#  7. zb-v (two chunks per stage in a V): --validate in the layout matrix,
#     the same checkpoint as 1f1b, its bubble on the virtual clocks equal to
#     doc/pipeline.md's (p-1) max(B, 2(B - W)) per stage, the V's turn is a copy (no
#     message), and --virtual-stages other than 2 is refused.
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

cfg="--layers 4 --dim 48 --heads 12 --seq 16 --batch 24 --steps 3 --warmup 2 --sample-len 0 --quiet --eval-every 0"

# 1. correctness against the unsharded oracle
validate_case 2 --pp 2 --micro-batches 4 --schedule zb-h1
validate_case 4 --pp 4 --micro-batches 4 --schedule zb-h1
validate_case 4 --tp 2 --pp 2 --micro-batches 2 --schedule zb-h1
validate_case 4 --pp 2 --dp 2 --micro-batches 3 --schedule zb-h1
validate_case 4 --pp 2 --dp 2 --micro-batches 2 --schedule zb-h1 --zero 1
validate_case 4 --pp 2 --dp 2 --micro-batches 2 --schedule zb-h1 --zero 2

# 2. bit-identical to 1f1b (and a planted difference: another schedule whose
#    sums run in another order is not, so cmp can fail)
for s in 1f1b zb-h1 gpipe; do
    tt 2 $cfg --pp 2 --micro-batches 4 --schedule $s --no-spot-check --save "$work/$s.safetensors"
    [ "$status" -eq 0 ] || not_ok "$s run for the checkpoint: exit $status"
done
if cmp -s "$work/1f1b.safetensors" "$work/zb-h1.safetensors"; then
    ok "zb-h1 and 1f1b write the same checkpoint, byte for byte"
else
    not_ok "zb-h1's checkpoint differs from 1f1b's"
fi
if cmp -s "$work/1f1b.safetensors" "$work/gpipe.safetensors"; then
    not_ok "planted: gpipe (backwards in reverse order) gives 1f1b's bytes; cmp cannot tell"
else
    ok "planted: gpipe's checkpoint differs from 1f1b's (cmp can fail)"
fi

# 3. the bubble formula on the virtual clocks
small="--dim 48 --heads 4 --seq 16 --batch 16 --steps 2 --quiet --sample-len 0 --eval-every 0 --no-spot-check"
printf '{"based_on": "classroom", "nvlink_bandwidth": 0, "nvlink_latency": 0,
 "network_bandwidth": 0, "network_latency": 0,
 "fixed_forward": %s, "fixed_backward": %s, "fixed_w": %s}\n' 0.002 0.003 0.001 > "$work/even.json"
sed 's/"network_latency": 0,/"network_latency": 0.0005,/; s/"nvlink_latency": 0,/"nvlink_latency": 0.0005,/' \
    "$work/even.json" > "$work/slow.json"

# bubbles FILE.json: every GPU's idle fraction over the pipeline window of the
# last step (first forward to last B or W of all its stages), one a line.
bubbles() {
    python3 - "$1" <<'EOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
last = max(e["args"]["step"] for e in ev)
comp = [e for e in ev if e["args"]["step"] == last and e["name"].split()[0] in ("forward", "B", "W")]
lo = min(e["ts"] for e in comp)
hi = max(e["ts"] + e["dur"] for e in comp)
for pid in sorted({e["pid"] for e in comp}):
    busy = sum(e["dur"] for e in comp if e["pid"] == pid)
    print("%.12f" % (1 - busy / (hi - lo)))
EOF
}

# formula P M F B W [SCHEDULE]: the idle fraction doc/pipeline.md derives
# for zb-h1 (default) or, with zb-v, for its two chunks per stage of costs
# F, B and W each (valid for F <= B, W <= B, m >= 2p - 2).
formula() {
    python3 -c "
p, m, f, b, w = $1, $2, $3, $4, $5
if '${6:-zb-h1}' == 'zb-v':
    idle, work = (p - 1) * max(b, 2 * (b - w)), 2 * m * (f + b + w)
else:
    idle, work = (p - 1) * (f + max(b - w, 0)), m * (f + b + w)
print(idle / (work + idle))"
}

# worst GOT EXPECT: the largest |got - expect| over the lines of GOT.
worst() {
    echo "$1" | python3 -c "
import sys
print('%.3g' % max(abs(float(x) - $2) for x in sys.stdin.read().split()))"
}

for case in "4 8" "3 4"; do
    set -- $case
    p=$1 m=$2
    tt "$p" $small --pp "$p" --layers "$p" --schedule zb-h1 --micro-batches "$m" \
        --cluster "$work/even.json" --trace "$work/even.trace"
    if [ "$status" -ne 0 ]; then
        not_ok "zb-h1 p $p m $m: exit $status"
        continue
    fi
    expect=$(formula "$p" "$m" 0.002 0.003 0.001)
    got=$(bubbles "$work/even.trace")
    w=$(worst "$got" "$expect")
    pct=$(python3 -c "print('%.1f' % (100 * $expect))")
    table=$(grep -c "^  gpu.*  *$pct%  *[0-9.]*%  *[0-9.]*%" "$work/out")
    if python3 -c "import sys; sys.exit(0 if $w <= 1e-9 else 1)" && [ "$table" -eq "$p" ]; then
        ok "zb-h1 p $p m $m, F 2 B 3 W 1 ms: bubble from the trace = formula $(printf %.6f "$expect") (worst error $w), table agrees on $p GPUs"
    else
        not_ok "zb-h1 p $p m $m: bubbles $(echo $got) against $expect (worst $w), $table table rows"
    fi
done
# W dearer than B: the formula's max(B - W, 0) is 0.
sed 's/"fixed_backward": 0.003/"fixed_backward": 0.001/; s/"fixed_w": 0.001/"fixed_w": 0.003/' \
    "$work/even.json" > "$work/wheavy.json"
tt 4 $small --pp 4 --layers 4 --schedule zb-h1 --micro-batches 4 --cluster "$work/wheavy.json" \
    --trace "$work/wheavy.trace"
expect=$(formula 4 4 0.002 0.001 0.003)
w=$(worst "$(bubbles "$work/wheavy.trace")" "$expect")
if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $w <= 1e-9 else 1)"; then
    ok "zb-h1 p 4 m 4, F 2 B 1 W 3 ms: bubble = formula $(printf %.6f "$expect") (worst error $w)"
else
    not_ok "zb-h1 with W dearer than B: worst error $w against $expect"
fi
# Planted: slow links must move the bubble off the formula.
tt 4 $small --pp 4 --layers 4 --schedule zb-h1 --micro-batches 8 --cluster "$work/slow.json" \
    --trace "$work/slow.trace"
expect=$(formula 4 8 0.002 0.003 0.001)
w=$(worst "$(bubbles "$work/slow.trace")" "$expect")
if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $w > 1e-3 else 1)"; then
    ok "planted: 0.5 ms links move zb-h1's bubble off the formula by $w"
else
    not_ok "planted slow links: the bubble stayed at the formula (worst $w)"
fi

# 4. B and W by name: the narration, the trace, the report
tt 2 $cfg --pp 2 --micro-batches 2 --schedule zb-h1 --explain --trace "$work/names.trace" \
    --timeline "$work/names.svg"
if [ "$status" -eq 0 ] && grep -q "input gradient (B) of micro-batch 1 on chunk 1" "$work/out" &&
    grep -q "W (weight gradients)" "$work/names.svg" && grep -q "B (input gradient)" "$work/names.svg" &&
    grep -q "weight gradients (W) of micro-batch 0 on chunk 0" "$work/out" &&
    grep -q "last backward or W" "$work/out" &&
    grep -q '"W mb1 chunk 0' "$work/names.trace" && grep -q '"B mb0 chunk 1' "$work/names.trace" &&
    awk '/^time steps as the papers/ { n = 2 } n && n-- && length > 100 { bad = 1 } END { exit bad }' \
        "$work/out"; then
    ok "--explain, --trace, --timeline and the bubble report name B and W apart (the legend cut within 100 characters)"
else
    not_ok "B and W names in --explain / --trace / report"
fi
# Every colour of a compute box in a zb-v timeline (two chunks a stage, so
# two shades of F, B and W) has its legend entry: W's second shade had none.
tt 2 $cfg --pp 2 --micro-batches 2 --schedule zb-v --timeline "$work/v.svg" --trace "$work/v.json"
missing=$(python3 - "$work/v.svg" <<'PY'
import re, sys
svg = open(sys.argv[1]).read()
boxes = set(re.findall(r'fill="(#[0-9a-f]{6})"[^>]*><title>(?:forward|B|W) mb', svg))
legend = svg[svg.index('class="legend"'):]
shown = set(re.findall(r'fill="(#[0-9a-f]{6})"/>\s*<text[^>]*>(?:forward|B \(input|W \(weight)', legend))
print(" ".join(sorted(boxes - shown)) if len(boxes) == 6 else "%d box colours" % len(boxes))
PY
)
[ "$status" -eq 0 ] && [ -z "$missing" ] && ok "zb-v timeline: the legend shows all 6 compute shades (F, B, W x 2 chunks)" \
    || not_ok "zb-v timeline legend: exit $status, without an entry: $missing"
# ... and its trace pairs every send with its receive by step, micro-batch,
# the chunk it goes into and what it carries: per micro-batch an activation
# and a gradient each way between the two stages (chunks 0-1 and 2-3; the
# V's turn, 1-2 on stage 1, is a copy), 8 a step, over the 2 traced steps.
pairs=$(python3 - "$work/v.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "PP"]
def key(e, a, b):
    g = e["args"]
    return (a, b, g.get("step"), g.get("mb"), g.get("chunk"), g.get("carries"))
s = sorted(key(e, e["pid"], e["args"]["peer"]) for e in ev if e["args"]["op"] == "send")
r = sorted(key(e, e["args"]["peer"], e["pid"]) for e in ev if e["args"]["op"] == "recv")
ok = s == r and len(set(s)) == len(s) and all(k[3] is not None and k[4] is not None and k[5] in ("activation", "gradient") for k in s)
print(len(s) if ok else "unpaired: %s" % sorted(set(s) ^ set(r))[:3])
PY
)
[ "$pairs" = 16 ] && ok "zb-v trace: its 16 sends (8 a step) pair with their receives by mb, chunk and cargo" \
    || not_ok "zb-v trace pairing: $pairs"

# 5. the memory account counts what B keeps for W: per (micro-batch,
#    block) the output gradients of q, k, v (N x C/tp each), proj, fc2 and
#    the two LayerNorms (N x C each) and fc1 (N x 4C/tp), N = sequences x T.
#    Stage 0 (blocks 0-1) holds 2 micro-batches under both schedules, so its
#    activations grow by exactly 2 x 2 x N (3C + 4C + 4C) x 4 bytes (tp 1).
mem="--layers 4 --dim 48 --heads 12 --seq 16 --batch 24 --steps 1 --sample-len 0 --quiet --eval-every 0 --no-spot-check --pp 2 --micro-batches 4 --report memory"
acts() { awk '$1 ~ /^gpu0\(/ && NF >= 8 && $2 !~ /%/ { print $3 }' "$work/out"; } # the memory row, not the bubble row
tt 2 $mem --schedule 1f1b
s1=$status a1=$(acts)
tt 2 $mem --schedule zb-h1
s2=$status a2=$(acts)
if [ "$s1$s2" != 00 ] || [ -z "$a1" ] || [ -z "$a2" ]; then
    not_ok "memory account: the runs exit $s1 and $s2, stage 0 activations '$a1' and '$a2'"
else
    grow=$(python3 -c "
N, C = (24 // 4) * 16, 48
want = 2 * 2 * N * (3 * C + 4 * C + 4 * C) * 4 / 2**20
got = $a2 - $a1
print('%.3f %.3f' % (got, want))")
    set -- $grow
    if [ "$1" = "$2" ]; then
        ok "memory account: zb-h1's activations on stage 0 grow by $1 MiB = 2 slots x 2 blocks of W's inputs"
    else
        not_ok "memory account: activations $a1 -> $a2 MiB, grew $1, want $2"
    fi
fi

# 6. refusals, one line each
expect_error "zb-h1 refuses --recompute" 2 "cannot run with --recompute" 2 $cfg --pp 2 \
    --micro-batches 4 --schedule zb-h1 --recompute full
expect_error "zb-h1 needs m >= p" 2 "at least as many micro-batches as pipeline stages" 4 $cfg \
    --pp 4 --micro-batches 2 --schedule zb-h1

# One stage has nothing to schedule: zb-h1 runs as 1f1b, so --recompute is
# taken, and the run says so.
tt 1 $cfg --micro-batches 4 --schedule zb-h1 --recompute full --steps 1
if [ "$status" -eq 0 ] && grep -q "^pipeline: one stage, so --schedule zb-h1 runs as 1f1b" "$work/out"; then
    ok "one stage: zb-h1 runs as 1f1b, and says so"
else
    not_ok "one stage with zb-h1 (exit $status)"
fi

# 7. zb-v
validate_case 2 --pp 2 --micro-batches 4 --schedule zb-v
validate_case 4 --pp 4 --layers 8 --micro-batches 6 --schedule zb-v
validate_case 4 --tp 2 --pp 2 --micro-batches 2 --schedule zb-v
validate_case 4 --pp 2 --dp 2 --micro-batches 3 --schedule zb-v
validate_case 4 --pp 2 --dp 2 --micro-batches 2 --schedule zb-v --zero 1
validate_case 8 --tp 2 --pp 2 --dp 2 --micro-batches 2 --schedule zb-v --zero 2

# Every W of a chunk runs in micro-batch order, as 1F1B's backwards do, and
# a block computes the same sums whichever chunk holds it: the same bytes.
tt 2 $cfg --pp 2 --micro-batches 4 --schedule zb-v --no-spot-check --save "$work/zb-v.safetensors"
if [ "$status" -eq 0 ] && cmp -s "$work/1f1b.safetensors" "$work/zb-v.safetensors"; then
    ok "zb-v and 1f1b write the same checkpoint, byte for byte"
else
    not_ok "zb-v's checkpoint differs from 1f1b's (exit $status)"
fi

# The bubble on the virtual clocks, one block per chunk (2p chunks).
for case in "4 8" "3 4"; do
    set -- $case
    p=$1 m=$2
    tt "$p" $small --pp "$p" --layers $((2 * p)) --schedule zb-v --micro-batches "$m" \
        --cluster "$work/even.json" --trace "$work/v.trace"
    if [ "$status" -ne 0 ]; then
        not_ok "zb-v p $p m $m: exit $status"
        continue
    fi
    expect=$(formula "$p" "$m" 0.002 0.003 0.001 zb-v)
    w=$(worst "$(bubbles "$work/v.trace")" "$expect")
    if python3 -c "import sys; sys.exit(0 if $w <= 1e-9 else 1)"; then
        ok "zb-v p $p m $m, F 2 B 3 W 1 ms per chunk: bubble from the trace = formula $(printf %.6f "$expect") (worst error $w)"
    else
        not_ok "zb-v p $p m $m: bubbles $(echo $(bubbles "$work/v.trace")) against $expect (worst $w)"
    fi
done
tt 4 $small --pp 4 --layers 8 --schedule zb-v --micro-batches 8 --cluster "$work/slow.json" \
    --trace "$work/vslow.trace"
expect=$(formula 4 8 0.002 0.003 0.001 zb-v)
w=$(worst "$(bubbles "$work/vslow.trace")" "$expect")
if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $w > 1e-3 else 1)"; then
    ok "planted: 0.5 ms links move zb-v's bubble off the formula by $w"
else
    not_ok "planted slow links under zb-v: the bubble stayed at the formula (worst $w)"
fi

# The V's turn (chunks p-1 and p, both on stage p-1) is a copy: per
# micro-batch stage 0 sends 2 messages (chunk 0's activation, chunk 2p-1's
# gradient) and stage p-1 also 2 (chunk p-1's gradient, chunk p's
# activation), where a looped placement would add 2 more on stage p-1.
tt 4 $cfg --pp 4 --layers 8 --micro-batches 6 --schedule zb-v --steps 1 --report comm
sends=$(awk '/^  gpu/ { g = $1 } $1 == "PP" && $2 == "send" { printf "%s %s ", g, $3 }' "$work/out")
if [ "$status" -eq 0 ] && grep -q "traffic equals its formula: yes" "$work/out" &&
    [ "$sends" = "gpu0(dp0,pp0,tp0) 12 gpu1(dp0,pp1,tp0) 24 gpu2(dp0,pp2,tp0) 24 gpu3(dp0,pp3,tp0) 12 " ]; then
    ok "zb-v: PP sends per GPU 12, 24, 24, 12 for 6 micro-batches (the turn on gpu3 is a copy), equal to the formula"
else
    not_ok "zb-v --report comm: PP sends '$sends'"
fi

expect_error "zb-v runs exactly 2 chunks per stage" 2 "runs exactly 2 chunks per stage (got v = 3)" \
    2 $cfg --pp 2 --layers 6 --micro-batches 4 --schedule zb-v --virtual-stages 3
expect_error "zb-v refuses --recompute" 2 "cannot run with --recompute" 2 $cfg --pp 2 \
    --micro-batches 4 --schedule zb-v --recompute selective
finish

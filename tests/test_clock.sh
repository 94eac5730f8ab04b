#!/bin/sh
# tests/test_clock.sh - the virtual GPU clocks in whole runs (doc/design.md section 12):
#  1. With free links and equal chunk costs (a cluster file with fixed_forward
#     and fixed_backward), the bubble of every schedule measured from the
#     --trace events equals its closed form to 1e-9 (naive (p-1)/p, gpipe and
#     1f1b (p-1)/(m+p-1), interleaved (p-1)/(vm+p-1)), computed here in Python
#     from the events, not taken from the program's table; the table agrees.
#  2. On classroom, a balanced model (12 blocks on 3 stages) is within 0.05 of
#     the closed form on every GPU.
#  3. The figures do not depend on the machine's load: a run beside busy loops
#     writes the same trace, byte for byte, and the same time columns.
#  4. The oracle and eval never advance the clocks: --validate with eval
#     every step gives the same step times as a run without them (the run
#     also samples, which comes after the last step's row).
#  5. --clock wall labels its figures as wall clock, and a step's reported
#     time leaves out the --validate oracle's work (the trace's oracle
#     events) but nothing else: it is the span of the step's events less
#     the oracle's time.
#  6. On classroom, whole steps equal a hand computation from kcost.c's
#     counts over the kernels forward.c calls (one GPU; dp 2 with two
#     buckets overlapped; tp 2; pp 2 1F1B with unequal stages), the trace's
#     first forward of stage 1 starts when stage 0's message arrives, and a
#     GPU that never waits shows 0.0% idle on the timeline.
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

small="--dim 48 --heads 4 --seq 16 --batch 16 --steps 2 --quiet --sample-len 0 --eval-every 0 --no-spot-check"
printf '{"based_on": "classroom", "nvlink_bandwidth": 0, "nvlink_latency": 0,
 "network_bandwidth": 0, "network_latency": 0,
 "fixed_forward": 0.001, "fixed_backward": 0.002}\n' > "$work/even.json"

# bubbles FILE.json: every GPU's idle fraction over the pipeline window of the
# last step (first forward to last backward of all its stages), one a line.
bubbles() {
    python3 - "$1" <<'EOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
last = max(e["args"]["step"] for e in ev)
comp = [e for e in ev if e["args"]["step"] == last and e["name"].split()[0] in ("forward", "backward")]
lo = min(e["ts"] for e in comp)
hi = max(e["ts"] + e["dur"] for e in comp)
for pid in sorted({e["pid"] for e in comp}):
    busy = sum(e["dur"] for e in comp if e["pid"] == pid)
    print("%.12f" % (1 - busy / (hi - lo)))
EOF
}

# 1. closed forms, p = 4, m = 4 and 8
for case in "naive 4 1" "gpipe 4 1" "1f1b 4 1" "naive 8 1" "gpipe 8 1" "1f1b 8 1" \
            "interleaved 4 2" "interleaved 8 2"; do
    set -- $case
    sched=$1 m=$2 v=$3
    layers=$((4 * v))
    tt 4 $small --pp 4 --layers $layers --schedule $sched --micro-batches $m --cluster "$work/even.json" \
        --trace "$work/even.trace"
    if [ "$status" -ne 0 ]; then
        not_ok "$sched m $m: exit $status"
        continue
    fi
    expect=$(python3 -c "
p, m, v = 4, $m, $v
print((p - 1) / p if '$sched' == 'naive' else (p - 1) / (v * m + p - 1))")
    got=$(bubbles "$work/even.trace")
    worst=$(echo "$got" | python3 -c "
import sys
e = $expect
print('%.3g' % max(abs(float(x) - e) for x in sys.stdin.read().split()))")
    pct=$(python3 -c "print('%.1f' % (100 * $expect))")
    table=$(grep -c "^  gpu.*  *$pct%  *$pct%  *$pct%" "$work/out")
    vtext=""
    [ "$v" -gt 1 ] && vtext=" v $v"
    if python3 -c "import sys; sys.exit(0 if $worst <= 1e-9 else 1)" && [ "$table" -eq 4 ]; then
        ok "$sched p 4 m $m$vtext: bubble from the trace = closed form $(printf %.6f "$expect") (worst error $worst), table agrees on 4 GPUs"
    else
        not_ok "$sched p 4 m $m: bubbles $(echo $got) against $expect (worst $worst), $table table rows agree"
    fi
done

# A planted fault: links that cost 0.5 ms each must move the bubble away from
# the closed form (so the check above can fail); the closed forms do not
# depend on the ratio of b to f, only on equal stages and free links.
sed 's/"network_latency": 0,/"network_latency": 0.0005,/; s/"nvlink_latency": 0,/"nvlink_latency": 0.0005,/' \
    "$work/even.json" > "$work/slow.json"
tt 4 $small --pp 4 --layers 4 --schedule gpipe --micro-batches 4 --cluster "$work/slow.json" \
    --trace "$work/slow.trace"
got=$(bubbles "$work/slow.trace" | head -n 1)
if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $got - 3/7 > 1e-3 else 1)"; then
    ok "planted: transfers of 0.5 ms make the gpipe bubble $got, above 3/7"
else
    not_ok "planted: costly links still give $got (exit $status)"
fi

# 2. classroom, balanced: 12 blocks on 3 stages (the head is 0.2 / 4 of a stage)
tt 3 --dim 96 --heads 12 --seq 64 --layers 12 --pp 3 --batch 12 --micro-batches 4 --steps 2 \
    --quiet --sample-len 0 --eval-every 0 --no-spot-check --trace "$work/class.trace"
theory=$(python3 -c "print(2 / 6)")
got=$(bubbles "$work/class.trace")
worst=$(echo "$got" | python3 -c "
import sys
print('%.4f' % max(abs(float(x) - $theory) for x in sys.stdin.read().split()))")
if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if $worst <= 0.05 else 1)"; then
    ok "classroom, 12 blocks on 3 stages, 1f1b m 4: idle $(echo $got | tr ' ' '/') within $worst of 1/3"
else
    not_ok "classroom balanced: idle $(echo $got) against 1/3 (worst $worst, exit $status)"
fi

# 3. the same figures under load: busy loops on every core beside the run
cfg="$small --tp 2 --pp 2 --layers 4 --micro-batches 4 --steps 3"
tt 4 $cfg --trace "$work/quiet.trace" --log "$work/quiet.csv"
s1=$status
pids=""
for i in 1 2 3 4; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
done
tt 4 $cfg --trace "$work/busy.trace" --log "$work/busy.csv"
s2=$status
kill $pids 2>/dev/null
wait 2>/dev/null
cut -d, -f1-8 "$work/quiet.csv" > "$work/quiet.cols"
cut -d, -f1-8 "$work/busy.csv" > "$work/busy.cols"
if [ "$s1$s2" = 00 ] && cmp -s "$work/quiet.trace" "$work/busy.trace" && cmp -s "$work/quiet.cols" "$work/busy.cols"; then
    ok "under 4 busy loops: the same trace byte for byte and the same step times ($(sed -n 2p "$work/busy.csv" | cut -d, -f5) ms virtual; wall $(sed -n 2p "$work/quiet.csv" | cut -d, -f9) ms quiet, $(sed -n 2p "$work/busy.csv" | cut -d, -f9) ms busy)"
else
    not_ok "load changed the virtual figures (exit $s1/$s2)"
    diff "$work/quiet.cols" "$work/busy.cols" | head -n 5
fi

# 4. the oracle and eval do not advance the clocks
tt 4 $cfg --log "$work/plain.csv"
tt 4 $(echo "$cfg" | sed 's/--eval-every 0/--eval-every 1/; s/--no-spot-check/--validate/; s/--sample-len 0/--sample-len 8/') \
    --log "$work/oracle.csv"
if [ "$status" -eq 0 ] && [ "$(cut -d, -f5,6,8 "$work/plain.csv")" = "$(cut -d, -f5,6,8 "$work/oracle.csv")" ] &&
   [ "$(cut -d, -f7 "$work/oracle.csv" | grep -c '[0-9]')" -eq 3 ]; then
    ok "--validate and eval every step leave the step times unchanged"
else
    not_ok "the oracle or eval moved the clocks (exit $status)"
    paste -d' ' "$work/plain.csv" "$work/oracle.csv" | head -n 4
fi

# 5. --clock wall says so
tt 2 $small --pp 2 --layers 2 --quiet --clock wall --timeline "$work/wall.svg"
if [ "$status" -eq 0 ] && grep -q "wall clock" "$work/wall.svg" && grep -q " wall " "$work/out"; then
    ok "--clock wall: the table and the timeline say wall clock"
else
    not_ok "--clock wall is not labelled (exit $status)"
fi
# The step time runs from before the step's first event to after its last,
# so on the wall clock it is the span of rank 0's events (the --log row is
# rank 0's) plus a few microseconds of setup (zeroing the gradients) outside
# any event, less the oracle's paused work. Bounds: not below the span less
# the oracle (nothing else left out; 1 us of the trace's rounding), and over
# it by less than half the oracle's time (a step time that kept the oracle's
# work would be over it by all of it).
tt 2 $small --pp 2 --layers 2 --clock wall --validate --trace "$work/wallv.json" --log "$work/wallv.csv"
verdict=$(python3 - "$work/wallv.json" "$work/wallv.csv" <<'EOF'
import csv, json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
ms = {int(r["step"]): float(r["ms"]) for r in csv.DictReader(open(sys.argv[2]))}
out = []
for s in sorted({e["args"]["step"] for e in ev}):
    mine = [e for e in ev if e["args"]["step"] == s]
    span = max(e["ts"] + e["dur"] for e in mine) - min(e["ts"] for e in mine)
    oracle = sum(e["dur"] for e in mine if e.get("cat") == "oracle")
    rep = ms[s] * 1e3  # us, as the trace
    good = oracle > 0 and span - 1 <= rep + oracle <= span + oracle / 2
    out.append("%s step %d: %.0f us reported, events span %.0f us, oracle %.0f us"
               % ("ok" if good else "BAD", s, rep, span, oracle))
print("; ".join(out) if out else "BAD: no events of rank 0")
EOF
)
if [ "$status" -eq 0 ] && [ -n "$verdict" ] && ! echo "$verdict" | grep -q BAD; then
    ok "--clock wall --validate: the step time leaves the oracle out ($verdict)"
else
    not_ok "--clock wall --validate: exit $status; $verdict"
fi

# The step line says the whole step too, "with the oracle": the log's
# wall_ms, where the oracle checked the step (--validate: every step).
tt 2 --dim 48 --heads 4 --seq 16 --batch 16 --steps 2 --sample-len 0 --eval-every 0 --pp 2 \
    --layers 2 --clock wall --validate --log "$work/wl.csv"
want=$(awk -F, 'NR > 1 { print $1, $9 }' "$work/wl.csv")
got=$(sed -n 's/^step *\([0-9]*\)\/2 .* ms wall | .* tok\/s wall | \([0-9.]*\) ms with the oracle.*/\1 \2/p' "$work/out")
# (the log has 3 decimals, the line 1: equal within the line's rounding)
same=$(printf '%s\n' "$want" | paste -d' ' - /dev/null | awk -v got="$got" '
    BEGIN { n = split(got, g, "\n"); for (i = 1; i <= n; i++) { split(g[i], f, " "); line[f[1]] = f[2] } }
    { d = line[$1] - $2; if (!($1 in line) || d > 0.051 || d < -0.051) bad = 1; k++ }
    END { print (k == 2 && !bad) ? "yes" : "no" }')
if [ "$status" -eq 0 ] && [ "$same" = yes ]; then
    ok "--clock wall --validate: each step line gives the whole step with the oracle, the log's wall_ms ($(echo $got))"
else
    not_ok "--clock wall --validate: step lines say '$(echo $got)', the log's wall_ms '$(echo $want)' (exit $status)"
fi

# 6. step times by hand. The expected values are computed below in Python,
#    kernel by kernel at the roofline max(FLOPs / (10 GFLOP/s x 0.5), bytes /
#    1 GB/s) with kcost.c's counts, collectives as rings on NVLink (200 MB/s,
#    10 us); nothing is taken from the program's output.
hand="--dim 48 --heads 4 --seq 16 --layers 2 --steps 1 --quiet --sample-len 0 --eval-every 0 --no-spot-check"
python3 - > "$work/hand.txt" <<'EOF'
PEAK, EFF, MBW, NVBW, NVLAT = 10e9, 0.5, 1e9, 200e6, 10e-6
def rl(fl, floats): return max(fl / (PEAK * EFF), 4 * floats / MBW)
def lin_f(N, C, O): return rl(2 * N * C * O, N * C + O * C + N * O)
def lin_b(N, C, O): return rl(4 * N * C * O, 2 * (N * C + O * C + N * O))
def ln_f(N, C): return rl(8 * N * C, 2 * N * C)
def ln_b(N, C): return rl(12 * N * C, 4 * N * C)
def ar(nbytes, n=2): return 2 * (n - 1) * (NVLAT + nbytes / n / NVBW)  # ring all-reduce
L, C, NH, T, V, B = 2, 48, 4, 16, 256, 4   # B: sequences per micro-batch
N = B * T
def block_f(tp):
    Cl, Hl, nh = C // tp, 4 * C // tp, NH // tp
    return (2 * ln_f(N, C) + 3 * lin_f(N, C, Cl) + lin_f(N, Cl, C) + lin_f(N, C, Hl)
            + lin_f(N, Hl, C) + rl(4 * B * T * T * Cl, 4 * B * T * Cl + B * nh * T * T)
            + rl(20 * N * Hl, 2 * N * Hl) + 2 * rl(N * C, 3 * N * C)  # GELU, residuals
            + (2 * ar(4 * N * C) if tp > 1 else 0))
def block_b(tp):
    Cl, Hl, nh = C // tp, 4 * C // tp, NH // tp
    return (2 * ln_b(N, C) + 3 * lin_b(N, C, Cl) + lin_b(N, Cl, C) + lin_b(N, C, Hl)
            + lin_b(N, Hl, C) + rl(8 * B * T * T * Cl, 10 * B * T * Cl + 3 * B * nh * T * T)
            + rl(25 * N * Hl, 3 * N * Hl) + (2 * ar(4 * N * C) if tp > 1 else 0))
def emb_f(tp): return rl(0, 2 * N * C) + rl(N * C, 3 * N * C) + (ar(4 * N * C) if tp > 1 else 0)
def emb_b(): return rl(N * C, 2 * N * C + T * C) + rl(N * C, 3 * N * C)
# The loss: one GPU, 5 FLOPs and 2 floats per column forward, 2 and 3
# backward. tp 2: each rank's slice of Vl = V / 2 columns (all real), its
# forward in three passes (max; subtract, exp, add; scale: 1, 3 and 1 of the
# 5 FLOPs, and the 2 floats in the same ratio) with the three all-reduces of
# N floats between them; the backward the one-GPU count over the slice.
def ce_f(tp):
    Vl = V // tp
    if tp == 1:
        return rl(5 * N * V, 2 * N * V)
    return (rl(1 * N * Vl, 2 / 5 * N * Vl) + 2 * ar(4 * N)
            + rl(3 * N * Vl, 6 / 5 * N * Vl) + ar(4 * N) + rl(1 * N * Vl, 2 / 5 * N * Vl))
def ce_b(tp): return rl(2 * N * (V // tp), 3 * N * (V // tp))
def head_f(tp): return ln_f(N, C) + lin_f(N, C, V // tp) + ce_f(tp)
def head_b(tp):
    return ln_b(N, C) + lin_b(N, C, V // tp) + ce_b(tp) + (ar(4 * N * C) if tp > 1 else 0)
def params(tp):  # this GPU's floats: both ends, one block (ln, row-parallel biases replicated)
    Cl = C // tp
    blk = 4 * C + 3 * (C * Cl + Cl) + Cl * C + C + 4 * C * Cl + 4 * Cl + 4 * Cl * C + C
    return 2 * (V // tp) * C + T * C + 2 * C, blk
def sumsq(P): return rl(2 * P, P)
def adamw(P): return rl(12 * P, 7 * P)
ends, blk = params(1)
P = ends + L * blk
f1 = emb_f(1) + L * block_f(1) + head_f(1)
b1 = head_b(1) + L * block_b(1) + emb_b()
print("gpu1", (f1 + b1 + sumsq(P) + adamw(P)) * 1e3)
# The step's loss travels with the gradient norm: one all-reduce of two
# doubles (16 bytes) after the sum of squares.
# dp 2, buckets of 65536 floats: [65536, P) is final after block 1's backward,
# [0, 65536) after the embeddings'; the rings run one after the other.
t1 = f1 + head_b(1) + block_b(1)
end1 = t1 + ar(4 * (P - 65536))
end0 = max(f1 + b1, end1) + ar(4 * 65536)
print("dp2", (end0 + sumsq(P) + ar(16) + adamw(P)) * 1e3)
ends, blk = params(2)
P = ends + L * blk
print("tp2", (emb_f(2) + L * block_f(2) + head_f(2) + head_b(2) + L * block_b(2) + emb_b()
              + sumsq(P) + ar(16) + adamw(P)) * 1e3)
# pp 2, 1F1B, 2 micro-batches: stage 0 = embeddings + block 0, stage 1 =
# block 1 + head; a message of N x C floats costs alpha + bytes / bandwidth.
f0, b0 = emb_f(1) + block_f(1), block_b(1) + emb_b()
g1, h1 = block_f(1) + head_f(1), head_b(1) + block_b(1)
a = NVLAT + 4 * N * C / NVBW
s1B0 = f0 + a + g1 + h1
s1B1 = max(s1B0, 2 * f0 + a) + g1 + h1
s0B1 = max(max(2 * f0, s1B0 + a) + b0, s1B1 + a) + b0
ends, blk = params(1)
P0, P1 = V * C + T * C + blk, blk + 2 * C + V * C
norm = max(s0B1, s1B1) + max(sumsq(P0), sumsq(P1)) + ar(16)
print("pp2", (norm + max(adamw(P0), adamw(P1))) * 1e3)
print("pp2first", (f0 + a) * 1e3)
EOF
for case in "gpu1 1 --batch 4 --micro-batches 1" "dp2 2 --dp 2 --batch 8 --micro-batches 1 --dp-bucket 256K" \
            "tp2 2 --tp 2 --batch 4 --micro-batches 1" "pp2 2 --pp 2 --batch 8 --micro-batches 2"; do
    set -- $case
    name=$1 np=$2
    shift 2
    tt "$np" $hand "$@" --log "$work/$name.csv" --trace "$work/$name.json" --timeline "$work/$name.svg"
    got=$(sed -n 2p "$work/$name.csv" | cut -d, -f5)
    want=$(sed -n "s/^$name //p" "$work/hand.txt")
    if [ "$status" -eq 0 ] && python3 -c "import sys; sys.exit(0 if abs($got - $want) < 2e-6 else 1)"; then
        ok "$name on classroom: $got ms per step, by hand $want ms"
    else
        not_ok "$name on classroom: ${got:-no} ms per step, by hand $want ms (exit $status)"
    fi
done
# stage 1's first forward starts when stage 0's first activation arrives
first=$(python3 - "$work/pp2.json" <<'EOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
t0 = min(e["ts"] for e in ev)
print(min(e["ts"] - t0 for e in ev if e["pid"] == 1 and e["name"].startswith("forward")) / 1e3)
EOF
)
want=$(sed -n 's/^pp2first //p' "$work/hand.txt")
if python3 -c "import sys; sys.exit(0 if abs(${first:-0} - $want) < 2e-3 else 1)"; then
    ok "pp2 trace: stage 1's first forward starts at $first ms, when the message arrives ($want ms)"
else
    not_ok "pp2 trace: stage 1's first forward starts at $first ms, expected $want ms"
fi
# a GPU that never waits: its idle column reads 0.0%, not -0.0% (a rounding)
if grep -q 'class="idle"[^>]*>0.0%' "$work/dp2.svg" && ! grep -q '>-0.0%' "$work/dp2.svg"; then
    ok "dp2 timeline: idle 0.0% on GPUs that never wait"
else
    not_ok "dp2 timeline idle: $(grep -o 'class="idle"[^<]*' "$work/dp2.svg" | head -n 2)"
fi

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]

#!/bin/sh
# tests/test_clock.sh - the virtual GPU clocks in whole runs (DESIGN section 12):
#  1. With free links and equal chunk costs (a cluster file with fixed_forward
#     and fixed_backward), the bubble of every schedule measured from the
#     --trace events equals its closed form to 1e-9 (naive (p-1)/p, gpipe and
#     1f1b (p-1)/(m+p-1), interleaved (p-1)/(vm+p-1)), computed here in Python
#     from the events, not taken from the program's table; the table agrees.
#  2. On classroom, a balanced model (12 blocks on 3 stages) is within 0.05 of
#     the closed form on every GPU.
#  3. The figures do not depend on the machine's load: a run beside busy loops
#     writes the same trace, byte for byte, and the same time columns.
#  4. The oracle, eval and sampling never advance the clocks: --validate with
#     eval every step gives the same step times as a run without them.
#  5. --clock wall labels its figures as wall clock.
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

# 4. the oracle, eval and sampling do not advance the clocks
tt 4 $cfg --log "$work/plain.csv"
tt 4 $(echo "$cfg" | sed 's/--eval-every 0/--eval-every 1/; s/--no-spot-check/--validate/; s/--sample-len 0/--sample-len 8/') \
    --log "$work/oracle.csv"
if [ "$status" -eq 0 ] && [ "$(cut -d, -f5,6,8 "$work/plain.csv")" = "$(cut -d, -f5,6,8 "$work/oracle.csv")" ] &&
   [ "$(cut -d, -f7 "$work/oracle.csv" | grep -c '[0-9]')" -eq 3 ]; then
    ok "--validate, eval every step and a sample leave the step times unchanged"
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

echo "$checks checks, $failures failed"
[ "$failures" -eq 0 ]

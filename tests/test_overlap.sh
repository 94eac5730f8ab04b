#!/bin/sh
# tests/test_overlap.sh - the DP all-reduce overlapped with the backward
# (doc/communication.md, "Overlapping the all-reduce with the backward"):
#  1. Checkpoints are the same bits with and without overlap (--no-overlap)
#     for dp 2, 3 and 4 (3 and 4: where the order of a sum matters) and for
#     tp 2 x pp 3 x dp 2, and the virtual step time with overlap is at most
#     the one without.
#  2. A hand-worked case on a cluster file: dp 2, one stage, 2 micro-batches
#     of fixed cost (forward 1 ms, backward 2 ms; a fixed cost is charged as
#     its chunk ends, so the units are final at the last backward's start,
#     4 ms), NVLink of 24 MB/s without latency. The P = 2VC + TC + L(12C^2 +
#     13C) + 2C floats (GPT-2's count, untied head) go in 16 KB buckets; a
#     dp-2 ring all-reduce of b bytes costs 2 x (b/2) / bandwidth = b / bw.
#     Without overlap: 6 ms of compute, the buckets one after another (4P
#     bytes), then the loss and the clipping norm's sum of squares in one
#     all-reduce (two doubles, 16 bytes). With overlap the buckets run from
#     4 ms, one after another: the first three end inside the last
#     backward, the last (the embeddings', final last) ends after it, so the
#     step is max(6 ms, 4 ms + 4P/bw) + 16/bw. The trace draws them on the
#     "beside compute" track, the first one starting before the last
#     backward ends. GPU 0 waits for them from the end of its compute to
#     the last ring's end, [6 ms, 4 ms + 4P/bw] with overlap and [6 ms,
#     6 ms + 4P/bw] without: the trace has that wait (on the communication
#     track, drawn in the timeline), and none on one GPU. AdamW costs no
#     time here (fixed chunk costs), so the optimizer step's event begins
#     where the step ends, after the loss and norm's all-reduce, instead of
#     spanning it.
#  3. Planted: --inject-bug early-bucket starts each bucket after the first
#     micro-batch's backward: --validate fails naming a gradient, and the
#     checkpoint differs from the correct one (so the comparison of 1 can
#     fail).
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

small="--layers 3 --dim 16 --heads 2 --seq 8 --batch 24 --micro-batches 2 --steps 2 --dp-bucket 4K
 --quiet --sample-len 0 --eval-every 0 --no-spot-check"

# ms FILE.csv: the virtual step time (ms column) of the last step.
ms() { awk -F, 'NR > 1 { v = $5 } END { print v }' "$1"; }

# 1. the same bits, on and off
for case in "2:--dp 2" "3:--dp 3" "4:--dp 4" "12:--tp 2 --pp 3 --dp 2"; do
    np=${case%%:*} flags=${case#*:}
    tt "$np" $small $flags --save "$work/on.st" --log "$work/on.csv"
    s_on=$status
    tt "$np" $small $flags --no-overlap --save "$work/off.st" --log "$work/off.csv"
    if [ "$s_on" -ne 0 ] || [ "$status" -ne 0 ]; then
        not_ok "$flags: exit $s_on with overlap, $status without"
        continue
    fi
    if cmp -s "$work/on.st" "$work/off.st"; then
        ok "$flags: checkpoints bit-identical with and without overlap"
    else
        not_ok "$flags: checkpoints differ: $(cmp "$work/on.st" "$work/off.st" 2>&1)"
    fi
    on=$(ms "$work/on.csv") off=$(ms "$work/off.csv")
    if awk -v a="$on" -v b="$off" 'BEGIN { exit !(a > 0 && a <= b) }'; then
        ok "$flags: virtual step $on ms with overlap <= $off ms without"
    else
        not_ok "$flags: virtual step $on ms with overlap, $off ms without"
    fi
    [ "$np" = 3 ] && cp "$work/on.st" "$work/dp3.st"
done

# 2. the hand-worked case
printf '{"based_on": "classroom", "nvlink_bandwidth": 24e6, "nvlink_latency": 0,
 "network_bandwidth": 0, "network_latency": 0,
 "fixed_forward": 0.001, "fixed_backward": 0.002}\n' > "$work/slow.json"
L=2 C=16 T=8 V=256
hand="--layers $L --dim $C --heads 2 --seq $T --batch 8 --micro-batches 2 --steps 2 --dp 2
 --dp-bucket 16K --cluster $work/slow.json --quiet --sample-len 0 --eval-every 0 --no-spot-check"
want=$(python3 -c "
L, C, T, V, bw = $L, $C, $T, $V, 24e6
P = 2 * V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
F, B = 1e-3, 2e-3
both = 16 / bw                 # the loss and the norm: two doubles, dp-2 ring
buckets = 4 * P / bw           # every bucket's ring, one after another
off = 2 * F + 2 * B + buckets + both
on = max(2 * F + 2 * B, 2 * F + B + buckets) + both
# GPU 0's wait for the buckets: from the end of its compute to the last ring
wait_on = (2 * F + 2 * B, max(2 * F + 2 * B, 2 * F + B + buckets))
wait_off = (2 * F + 2 * B, 2 * F + 2 * B + buckets)
print('%.6f %.6f %d %.6f %.6f %.6f %.6f' % (on * 1e3, off * 1e3, P, *(t * 1e3 for t in wait_on + wait_off)))")
set -- $want
want_on=$1 want_off=$2 P=$3 wait_on="$4 $5" wait_off="$6 $7"
tt 2 $hand --log "$work/h_on.csv" --trace "$work/h_on.json" --timeline "$work/h_on.svg"
s_on=$status
tt 2 $hand --no-overlap --log "$work/h_off.csv" --trace "$work/h_off.json"
if [ "$s_on" -ne 0 ] || [ "$status" -ne 0 ]; then
    not_ok "hand-worked: exit $s_on with overlap, $status without"
else
    for m in "on:$want_on:$(ms "$work/h_on.csv")" "off:$want_off:$(ms "$work/h_off.csv")"; do
        IFS=: read -r mode w g <<EOF
$m
EOF
        if awk -v w="$w" -v g="$g" 'BEGIN { d = w - g; exit !(d < 2e-6 && d > -2e-6) }'; then
            ok "hand-worked dp 2 (P = $P), overlap $mode: step $g ms as worked out ($w)"
        else
            not_ok "hand-worked dp 2 (P = $P), overlap $mode: step $g ms, worked out $w"
        fi
    done
    # The trace: GPU 0's last step, the buckets on their own track (tid 2).
    got=$(python3 - "$work/h_on.json" <<'EOF'
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
last = max(e["args"]["step"] for e in ev)
ev = [e for e in ev if e["args"]["step"] == last]
bwd_end = max(e["ts"] + e["dur"] for e in ev if e["name"].startswith("backward"))
dp = sorted((e for e in ev if e["tid"] == 2), key=lambda e: e["ts"])
ok = (len(dp) == 4 and all(e["args"]["group"] == "DP" for e in dp)
      and dp[0]["ts"] < bwd_end and dp[-1]["ts"] + dp[-1]["dur"] > bwd_end)
print("%s %d buckets beside compute, first at %.1f us, last ends %.1f us, backward ends %.1f us"
      % ("yes" if ok else "no", len(dp), dp[0]["ts"] if dp else -1,
         dp[-1]["ts"] + dp[-1]["dur"] if dp else -1, bwd_end))
EOF
)
    case $got in
        yes*) ok "trace: ${got#yes }" ;;
        *) not_ok "trace: ${got#no }" ;;
    esac
    # The wait and the optimizer step, on GPU 0's last step (ms from its start).
    for m in "on:$wait_on:$want_on" "off:$wait_off:$want_off"; do
        IFS=: read -r mode w end <<EOF
$m
EOF
        got=$(python3 - "$work/h_$mode.json" $w $end <<'EOF'
import json, sys
w0, w1, end = map(float, sys.argv[2:])
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["pid"] == 0]
last = max(e["args"]["step"] for e in ev)
ev = [e for e in ev if e["args"]["step"] == last]
t0 = min(e["ts"] for e in ev)
ms = lambda us: (us - t0) / 1e3
waits = [e for e in ev if "(wait)" in e["name"]]
opt = [e for e in ev if e["name"] == "optimizer step"]
good = (len(waits) == 1 and waits[0]["tid"] == 1 and waits[0]["cat"] == "DP" and len(opt) == 1
        and abs(ms(waits[0]["ts"]) - w0) < 5e-5 and abs(ms(waits[0]["ts"] + waits[0]["dur"]) - w1) < 5e-5
        and abs(ms(opt[0]["ts"]) - end) < 5e-5)
print("%s waits %s ms, optimizer step from %s ms"
      % ("yes" if good else "no", ["%.6f..%.6f" % (ms(e["ts"]), ms(e["ts"] + e["dur"])) for e in waits],
         ["%.6f" % ms(e["ts"]) for e in opt]))
EOF
)
        case $got in
            yes*) ok "trace, overlap $mode: GPU 0 ${got#yes } (worked out: wait $w, optimizer from $end)" ;;
            *) not_ok "trace, overlap $mode: GPU 0 ${got#no }; worked out: wait $w, optimizer step from $end" ;;
        esac
    done
    # The timeline draws GPU 0's wait as a box, in the legend's colour.
    if python3 - "$work/h_on.svg" <<'EOF'
import sys
import xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
row = next(g for g in root.iter(ns + "g") if g.get("id") == "row0")
box = [r for r in row.iter(ns + "rect") if "(wait)" in "".join(r.itertext())]
legend = next(g for g in root.iter(ns + "g") if g.get("class") == "legend")
texts = list(legend.iter(ns + "text"))
swatch = [r for r, t in zip(legend.iter(ns + "rect"), texts) if "DP all-reduce (wait)" in "".join(t.itertext())]
sys.exit(0 if len(box) == 1 and len(swatch) == 1 and box[0].get("fill") == swatch[0].get("fill")
         and float(box[0].get("width")) > 1 else 1)
EOF
    then
        ok "timeline: GPU 0's wait is a box in the colour of the legend's 'DP all-reduce (wait)'"
    else
        not_ok "timeline: no wait box on GPU 0's row matching the legend"
    fi
fi

# One GPU: nothing to wait for.
tt 1 $small --trace "$work/one.json"
if [ "$status" -eq 0 ] && ! grep -q '(wait)' "$work/one.json" && grep -q '"optimizer step"' "$work/one.json"; then
    ok "dp 1: the trace has the optimizer step and no wait"
else
    not_ok "dp 1: exit $status, $(grep -c '(wait)' "$work/one.json" 2>/dev/null) waits in the trace"
fi

# 3. planted: buckets started before their last micro-batch's gradient
tt 3 $small --dp 3 --inject-bug early-bucket --validate
if [ "$status" -eq 1 ] && grep -q "validation FAILED: gradient of" "$work/out"; then
    ok "early-bucket: --validate fails ($(grep -o 'gradient of [^ ]*' "$work/out" | head -n 1))"
else
    not_ok "early-bucket: exit $status, no gradient named by --validate"
fi
tt 3 $small --dp 3 --inject-bug early-bucket --save "$work/early.st"
if [ "$status" -eq 0 ] && [ -s "$work/dp3.st" ] && ! cmp -s "$work/early.st" "$work/dp3.st"; then
    ok "early-bucket: the checkpoint differs from the correct one (the comparison can fail)"
else
    not_ok "early-bucket: exit $status, checkpoint not different from the correct one"
fi
finish

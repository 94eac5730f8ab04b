#!/bin/sh
# tests/test_trace.sh - the trace views: --trace writes a Chrome trace that
# parses, names one process per virtual GPU with its coordinates, keeps
# each GPU's compute events disjoint to the printed digit, pairs each
# pipeline send with its receive by micro-batch and chunk, and holds
# every forward and backward of the last step plus the TP and PP transfers,
# with dp > 1 one wait for the DP all-reduce per GPU and step (none with dp
# 1), no optimizer event over a transfer (the norm's all-reduce apart), the
# loss and norm all-reduce by name on every GPU (a planted bare one fails),
# and on the wall clock the oracle's paused work as an event after it (none
# on the virtual clock); --timeline writes well-formed SVG
# with one labelled row per GPU, the micro-batch numbers, the idle fractions,
# the named all-reduces and a legend (rendered to PNG when rsvg-convert is
# installed); a path that cannot be written is an error that leaves no
# partial file.
# The files are checked with python3 (json and xml.etree only).
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

cfg="--dim 48 --heads 12 --seq 16 --steps 3 --quiet --sample-len 0 --eval-every 0"

# check_json FILE TP PP DP M LAST_STEP CLOCK: prints what is wrong, exits 1
# if anything.
check_json() {
    python3 - "$@" <<'EOF'
import json, sys
path, (tp, pp, dp, m, last), clock = sys.argv[1], map(int, sys.argv[2:7]), sys.argv[7]
world = tp * pp * dp
bad = []
try:
    doc = json.load(open(path))
except (OSError, ValueError) as err:
    print("does not parse: %s" % err)
    sys.exit(1)
if doc.get("displayTimeUnit") != "ms":
    bad.append("displayTimeUnit is not ms")
evs = doc.get("traceEvents", [])
def name_of(r):  # TP fastest, then DP, then PP (include/tt/comm/grid.h)
    return "gpu%d(dp%d,pp%d,tp%d)" % (r, (r // tp) % dp, r // (tp * dp), r % tp)
procs = {e["pid"]: e["args"]["name"] for e in evs if e.get("ph") == "M" and e.get("name") == "process_name"}
nproc = sum(1 for e in evs if e.get("ph") == "M" and e.get("name") == "process_name")
if nproc != world or sorted(procs.values()) != sorted(name_of(r) for r in range(world)):
    bad.append("process names %s, expected %d: %s" % (sorted(procs.values()), world, [name_of(r) for r in range(world)]))
xs = [e for e in evs if e.get("ph") == "X"]
neg = [e for e in xs if not (e["ts"] >= 0 and e["dur"] >= 0)]
if not xs or neg:
    bad.append("%d complete events, %d with negative ts or dur" % (len(xs), len(neg)))
# Events on one GPU's compute track are disjoint, exactly as printed (the
# format lets events on a track nest or follow, not overlap): read in
# decimal, each ends where or before the next begins. Rounding ts and dur
# apart had ends 1 ns past the next start.
from decimal import Decimal
track = {}
for e in json.load(open(path), parse_float=Decimal)["traceEvents"]:
    if e.get("ph") == "X" and e.get("tid") == 0:
        track.setdefault(e["pid"], []).append(e)
# Every pipeline send names the micro-batch, the chunk it goes into and what
# it carries, and the peer's receive names the same: they pair one to one.
def key(e, a, b):
    return (a, b, e["args"].get("step"), e["args"].get("mb"), e["args"].get("chunk"), e["args"].get("carries"))
sends = [key(e, e["pid"], e["args"].get("peer")) for e in xs if e.get("cat") == "PP" and e["args"].get("op") == "send"]
recvs = [key(e, e["args"].get("peer"), e["pid"]) for e in xs if e.get("cat") == "PP" and e["args"].get("op") == "recv"]
if any(k[3] is None or k[4] is None or k[5] not in ("activation", "gradient") for k in sends + recvs):
    bad.append("PP transfers without mb, chunk or carries: %s" % [k for k in sends + recvs if k[3] is None or k[4] is None or not k[5]][:2])
elif sorted(sends) != sorted(recvs) or len(set(sends)) != len(sends):
    bad.append("PP sends and receives do not pair by step, mb and chunk: %s" % sorted(set(sends) ^ set(recvs))[:3])
# A TP collective names its compute's micro-batch and chunk; DP and other
# communication serves every micro-batch and names none.
comms = [e for e in xs if e.get("tid") in (1, 2) and e["args"].get("op")]
untagged_tp = [e["name"] for e in comms if e.get("cat") == "TP" and ("mb" not in e["args"] or "chunk" not in e["args"])]
tagged_dp = [e["name"] for e in comms if e.get("cat") in ("DP", "other") and ("mb" in e["args"] or "carries" in e["args"])]
if untagged_tp or tagged_dp:
    bad.append("TP events without mb/chunk %s; DP or other events with them %s" % (untagged_tp[:2], tagged_dp[:2]))
for pid, mine in track.items():
    mine.sort(key=lambda e: (e["ts"], -e["dur"]))
    over = [(a["name"], b["name"]) for a, b in zip(mine, mine[1:]) if b["ts"] < a["ts"] + a["dur"]]
    if over:
        bad.append("gpu %d: %d events overlap the next on its compute track, first %s" % (pid, len(over), over[0]))
for pid, gpu in sorted(procs.items()):
    mine = [e for e in xs if e["pid"] == pid]
    for kind in ("forward", "backward"):
        mbs = {e["args"].get("mb") for e in mine
               if e.get("cat") == "compute" and e["name"].startswith(kind) and e["args"].get("step") == last}
        if mbs != set(range(m)):
            bad.append("%s: %s of step %d for micro-batches %s, expected 0..%d" % (gpu, kind, last, sorted(mbs), m - 1))
    comm = [e for e in mine if e.get("tid") == 1 and e["args"].get("bytes", 0) > 0]
    want = []
    if tp > 1:
        want.append(("TP", "all-reduce"))
    if pp > 1:
        want += [("PP", "send"), ("PP", "recv")]
    for grp, op in want:
        hits = [e for e in comm if e.get("cat") == grp and e["args"].get("group") == grp and e["args"].get("op") == op]
        if not hits:
            bad.append("%s: no %s %s with bytes > 0" % (gpu, grp, op))
        elif op != "all-reduce" and not all(0 <= e["args"].get("peer", -1) < world for e in hits):
            bad.append("%s: %s %s without a peer" % (gpu, grp, op))
    # The DP sync (no ZeRO here) ends every step of a GPU with dp > 1 in a
    # wait for its all-reduce (0 us when the rings ended before it), on the
    # comm track; with dp 1 there is nothing to wait for.
    want_waits = 1 if dp > 1 else 0
    for step in sorted({e["args"].get("step") for e in mine if "step" in e.get("args", {})}):
        waits = [e for e in mine if e["args"].get("step") == step and "(wait)" in e["name"]]
        if len(waits) != want_waits or not all(e.get("tid") == 1 and e.get("cat") == "DP" and
                                               e["args"].get("waits_for") == "all-reduce" for e in waits):
            bad.append("%s: step %d has %d waits %s, expected %d DP all-reduce wait on tid 1"
                       % (gpu, step, len(waits), [(e["name"], e.get("tid"), e.get("cat")) for e in waits], want_waits))
    # The optimizer's boxes are its compute: none spans a transfer or a
    # collective of its GPU (the gradient norm's all-reduce comes between
    # them), beyond the 0.001 us of the printed times.
    for o in (e for e in mine if e.get("cat") == "optimizer"):
        for c in (e for e in mine if e.get("tid") == 1 and e["dur"] > 0):
            if min(o["ts"] + o["dur"], c["ts"] + c["dur"]) - max(o["ts"], c["ts"]) > 0.01:
                bad.append("%s: %s [%.3f, +%.3f] spans %s [%.3f, +%.3f]" % (gpu, o["name"], o["ts"], o["dur"],
                                                                          c["name"], c["ts"], c["dur"]))
                break
    # The bookkeeping all-reduce of the step (src/train/train.c), by name:
    # the loss and the clipping norm's sum of squares, two doubles (16 B),
    # over the world (booked as other); no call of the step is left as a
    # bare "all-reduce other". It sits between the optimizer's two boxes.
    step = [e for e in mine if e["args"].get("step") == last]
    other = [e for e in step if e.get("tid") == 1 and e.get("cat") == "other"]
    def one(purpose):
        hits = [e for e in other if e["args"].get("purpose") == purpose]
        if len(hits) != 1 or not all(e["name"].startswith(purpose + " (other) 16 B") and
                                     e["args"].get("op") == "all-reduce" and
                                     e["args"].get("bytes") == 16 for e in hits):
            bad.append("%s: step %d has %s for '%s', expected one all-reduce of 16 B named so"
                       % (gpu, last, [e["name"] for e in hits], purpose))
            return None
        return hits[0]
    both = one("loss and norm all-reduce")
    unnamed = [e["name"] for e in other if not e["args"].get("purpose")]
    if unnamed:
        bad.append("%s: unnamed other communication %s" % (gpu, unnamed))
    end = lambda e: e["ts"] + e["dur"]
    box = {e["name"]: e for e in step if e.get("cat") == "optimizer"}
    if both and {"gradient norm", "optimizer step"} <= set(box) and not (
            end(box["gradient norm"]) <= both["ts"] + 0.01
            and end(both) <= box["optimizer step"]["ts"] + 0.01):
        bad.append("%s: not gradient norm < the loss and norm all-reduce < optimizer step" % gpu)
    # The oracle's work (the spot check of the last step) pauses the clocks:
    # on the wall clock it takes time and is an event, the longest one
    # (validating the gradients) between the loss and norm all-reduce and
    # the optimizer step; on the virtual
    # clock it takes none and is not recorded.
    oracle = [e for e in step if e.get("cat") == "oracle"]
    if clock == "virtual" and oracle:
        bad.append("%s: oracle events on the virtual clock: %s" % (gpu, [e["name"] for e in oracle]))
    if clock == "wall":
        big = max(oracle, key=lambda e: e["dur"]) if oracle else None
        if not big or not all(e["name"] == "oracle (paused clock)" and e.get("tid") == 0 for e in oracle):
            bad.append("%s: step %d has oracle events %s, expected 'oracle (paused clock)' on tid 0"
                       % (gpu, last, [(e["name"], e.get("tid")) for e in oracle]))
        elif both and "optimizer step" in box and not (
                big["dur"] > 0 and end(both) <= big["ts"] + 0.01 and end(big) <= box["optimizer step"]["ts"] + 0.01):
            bad.append("%s: the oracle [%.3f, +%.3f] is not between the loss and norm all-reduce and the optimizer step"
                       % (gpu, big["ts"], big["dur"]))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
}

# check_svg FILE TP PP DP CLOCK: the same kind of report for the timeline.
check_svg() {
    python3 - "$@" <<'EOF'
import re, sys
import xml.etree.ElementTree as ET
path, (tp, pp, dp), clock = sys.argv[1], map(int, sys.argv[2:5]), sys.argv[5]
world = tp * pp * dp
ns = "{http://www.w3.org/2000/svg}"
try:
    root = ET.parse(path).getroot()
except (OSError, ET.ParseError) as err:
    print("not well-formed XML: %s" % err)
    sys.exit(1)
bad = []
if root.tag != ns + "svg" or not root.get("viewBox"):
    bad.append("root is %s (viewBox %s), expected an svg element of the SVG namespace with a viewBox" % (root.tag, root.get("viewBox")))
def cls(el, c):
    return c in (el.get("class") or "").split()
def text(el):
    return "".join(el.itertext()).strip()
title = [text(t) for t in root.iter(ns + "text") if cls(t, "title")]
layout = "tp%d x pp%d x dp%d" % (tp, pp, dp)
if len(title) != 1 or layout not in title[0] or not re.search(r"step \d+", title[0], re.I) or " ms" not in title[0]:
    bad.append("title %s does not give the step, %s and the span" % (title, layout))
rows = [g for g in root.iter(ns + "g") if cls(g, "row")]
labels = [text(t) for g in rows for t in g.iter(ns + "text") if cls(t, "label")]
want = ["gpu%d(dp%d,pp%d,tp%d)" % (r, (r // tp) % dp, r // (tp * dp), r % tp) for r in range(world)]
if len(rows) != world or labels != want:
    bad.append("%d rows labelled %s, expected %d: %s" % (len(rows), labels, world, want))
drawn = labelled = 0
for g, label in zip(rows, labels):
    # Every micro-batch's forward and backward box is in the row (their
    # tooltips say which); the numbers drawn inside are the ones that fit,
    # which depends on the timing, so only their form is checked.
    tips = [text(t) for t in g.iter(ns + "title")]
    fwd = {int(m) for m in re.findall(r"forward mb(\d+)", " ".join(tips))}
    bwd = {int(m) for m in re.findall(r"backward mb(\d+)", " ".join(tips))}
    if len(fwd) < 4 or fwd != set(range(max(fwd) + 1)) or bwd != fwd:
        bad.append("%s: forward boxes for micro-batches %s, backward %s" % (label, sorted(fwd), sorted(bwd)))
    nums = [text(t) for t in g.iter(ns + "text") if cls(t, "mb")]
    if not all(n.isdigit() and int(n) in fwd for n in nums):
        bad.append("%s: micro-batch numbers drawn %s" % (label, nums))
    drawn += len(nums)
    # The bookkeeping all-reduces by name in the tooltips (none bare), and
    # over their strips the name or its short form where it fits; the
    # oracle's paused work a box on the wall clock only.
    for want in ("loss and norm all-reduce (other) 16 B",):
        if not any(t.startswith(want) for t in tips):
            bad.append("%s: no tooltip '%s'" % (label, want))
    if any(t.startswith("all-reduce other") for t in tips):
        bad.append("%s: a bare 'all-reduce other' tooltip" % label)
    names = [text(t) for t in g.iter(ns + "text") if cls(t, "comm-label")]
    if not set(names) <= {"loss and norm all-reduce", "loss"}:
        bad.append("%s: strip labels %s" % (label, names))
    labelled += len(names)
    if (clock == "wall") != any(t.startswith("oracle (paused clock)") for t in tips):
        bad.append("%s: oracle box %s on the %s clock" % (label, "missing" if clock == "wall" else "drawn", clock))
    idle = [text(t) for t in g.iter(ns + "text") if cls(t, "idle")]
    if len(idle) != 1 or not re.fullmatch(r"\d+(\.\d)?%", idle[0]) or not 0 <= float(idle[0][:-1]) <= 100:
        bad.append("%s: idle fraction %s" % (label, idle))
if drawn == 0:
    bad.append("no micro-batch number drawn in any box")
legend = " ".join(text(t) for g in root.iter(ns + "g") if cls(g, "legend") for t in g.iter(ns + "text"))
# Whether a strip is wide enough for its label depends on its width, which
# on the wall clock is the machine's timing (a busy machine drew none once):
# required on the virtual clock only, where the widths are the same each run.
if labelled == 0 and clock != "wall":
    bad.append("no bookkeeping all-reduce labelled over its strip on any row")
words = ["forward", "backward", "optimizer", "TP", "PP", "DP", "idle",
         "other communication: loss and norm all-reduce"]
for word in words + (["oracle"] if clock == "wall" else []):
    if word not in legend:
        bad.append("legend '%s' lacks '%s'" % (legend, word))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
}

# check_png SVG: renders it with rsvg-convert (Debian: librsvg2-bin), if any.
check_png() {
    command -v rsvg-convert >/dev/null 2>&1 || { echo "# rsvg-convert not installed: no PNG rendering"; return; }
    rm -f "$work/t.png"
    if rsvg-convert -o "$work/t.png" "$1" 2>"$work/rsvg.err" && [ -s "$work/t.png" ] &&
        [ "$(od -An -c -N4 "$work/t.png" | tr -d ' ')" = "211PNG" ]; then
        ok "$2: rsvg-convert renders it ($(wc -c <"$work/t.png") bytes of PNG)"
    else
        not_ok "$2: rsvg-convert fails: $(cat "$work/rsvg.err")"
    fi
}

# run_case WHAT CLOCK TP PP DP M NP ARGS... (the last step, 2, is
# spot-checked: the oracle works in it)
run_case() {
    what=$1 clock=$2 tp=$3 pp=$4 dp=$5 m=$6 np=$7
    shift 7
    rm -f "$work/t.json" "$work/t.svg"
    tt "$np" $cfg --tp "$tp" --pp "$pp" --dp "$dp" --micro-batches "$m" --clock "$clock" "$@" \
        --trace "$work/t.json" --timeline "$work/t.svg"
    if [ "$status" -ne 0 ]; then
        not_ok "$what: exit $status"
        return
    fi
    if check_json "$work/t.json" "$tp" "$pp" "$dp" "$m" 2 "$clock" >"$work/check" 2>&1; then
        ok "$what: the Chrome trace parses, $np named GPUs, forward and backward of mb 0..$((m - 1)) on each, TP/PP traffic, $([ "$dp" -gt 1 ] && echo "a" || echo "no") DP wait, no optimizer box over a transfer, the loss and norm all-reduce named, $([ "$clock" = wall ] && echo "the oracle's paused work after it" || echo "no oracle event")"
    else
        not_ok "$what: trace: $(cat "$work/check")"
    fi
    if check_svg "$work/t.svg" "$tp" "$pp" "$dp" "$clock" >"$work/check" 2>&1; then
        ok "$what: the timeline is SVG with $np labelled rows, micro-batch numbers, idle fractions, named bookkeeping all-reduces, a legend"
    else
        not_ok "$what: timeline: $(cat "$work/check")"
    fi
    check_png "$work/t.svg" "$what"
}

run_case "4 GPUs (tp2 pp2, 4 micro-batches)" virtual 2 2 1 4 4 --layers 4 --batch 8
run_case "4 GPUs on the wall clock" wall 2 2 1 4 4 --layers 4 --batch 8
# (interleaved: a stage sends an activation and a gradient into one chunk)
run_case "2 GPUs (pp2, interleaved, 2 chunks a stage)" virtual 1 2 1 4 2 --layers 4 --batch 8 --schedule interleaved --virtual-stages 2
# (a cluster file's name is text in the timeline, escaped: the SVG was not
# well-formed with an & in it)
printf '{"based_on": "classroom", "name": "R&D <lab>"}\n' > "$work/rd.json"
run_case "2 GPUs (pp2) on a cluster named 'R&D <lab>'" virtual 1 2 1 4 2 --layers 4 --batch 8 --cluster "$work/rd.json"
python3 -c 'import sys, xml.etree.ElementTree as ET
t = "".join(ET.parse(sys.argv[1]).getroot().itertext())
sys.exit("virtual time on R&D <lab>" not in t)' "$work/t.svg" 2>/dev/null &&
    ok "... and its title and axis name the cluster as written" || not_ok "the timeline does not name the cluster 'R&D <lab>'"
# (the last case: the planted faults below edit its files)
run_case "12 GPUs (tp2 pp3 dp2, 16 micro-batches)" virtual 2 3 2 16 12 --layers 6 --batch 32

# The checks above see a wrong name: the 12 GPUs' trace with gpu5's loss
# and norm all-reduce planted back to the bare "all-reduce other 16 B" (no
# purpose), and its timeline with gpu7's tooltip of that call so.
python3 - "$work/t.json" "$work/bad.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for e in doc["traceEvents"]:
    if e.get("pid") == 5 and e.get("args", {}).get("purpose") == "loss and norm all-reduce":
        e["name"] = "all-reduce other 16 B"
        del e["args"]["purpose"]
json.dump(doc, open(sys.argv[2], "w"))
EOF
if check_json "$work/bad.json" 2 3 2 16 2 virtual >"$work/check" 2>&1; then
    not_ok "a planted bare loss and norm all-reduce on gpu5 passes the trace's check"
elif grep -q "^gpu5(dp0,pp1,tp1): .*'loss and norm all-reduce'" "$work/check" &&
     grep -q "^gpu5(dp0,pp1,tp1): unnamed other communication \['all-reduce other 16 B'\]" "$work/check" &&
     [ "$(grep -vc '^gpu5(' "$work/check")" -eq 0 ]; then
    ok "a planted bare loss and norm all-reduce fails the trace's check on gpu5 only"
else
    not_ok "a planted bare loss and norm all-reduce on gpu5: the check says $(cat "$work/check")"
fi
awk '/<g class="row" id="row7">/ { r = 1 } r && /loss and norm all-reduce \(other\)/ && !done { sub(/loss and norm all-reduce \(other\)/, "all-reduce other"); done = 1 } { print }' \
    "$work/t.svg" >"$work/bad.svg"
if check_svg "$work/bad.svg" 2 3 2 virtual >"$work/check" 2>&1; then
    not_ok "a planted bare loss and norm all-reduce tooltip on gpu7 passes the timeline's check"
elif grep -q "^gpu7(dp1,pp1,tp1): no tooltip 'loss and norm all-reduce (other) 16 B'" "$work/check" &&
     [ "$(grep -vc '^gpu7(' "$work/check")" -eq 0 ]; then
    ok "a planted bare loss and norm all-reduce tooltip fails the timeline's check on gpu7 only"
else
    not_ok "a planted bare loss and norm all-reduce tooltip on gpu7: the check says $(cat "$work/check")"
fi

# Every view at once (the explanation, the memory and traffic reports, trace
# and timeline after the naive schedule's 8 micro-batches), three times: a
# run like this once seemed to stop after the memory table, so it must end,
# and end with the traffic report that follows that table.
for i in 1 2 3; do
    rm -f "$work/t.json" "$work/t.svg"
    tt 4 --pp 4 --layers 8 --dim 24 --heads 6 --seq 16 --batch 16 --micro-batches 8 --steps 2 \
        --sample-len 0 --eval-every 0 --eval-windows 4 --schedule naive --explain \
        --report memory,comm --timeline "$work/t.svg" --trace "$work/t.json" --watchdog 60
    if [ "$status" -eq 0 ] && grep -q '^memory per virtual GPU' "$work/out" &&
       [ "$(awk '/^memory per virtual GPU/ { m = 1 } m && /^  gpu[0-3]\(dp0,pp[0-3],tp0\) /' "$work/out" | wc -l)" -ge 4 ] &&
       grep -q "^every GPU's TP/PP/DP traffic equals its formula: yes" "$work/out" && [ -s "$work/t.json" ] && [ -s "$work/t.svg" ]; then
        ok "every view at once on pp 4 (naive, 8 micro-batches), run $i: ends with the memory and traffic reports, trace and timeline"
    else
        not_ok "every view at once on pp 4 (naive), run $i: exit $status"
    fi
done

# A trace that cannot be written: one message, every rank exits 1.
expect_error "unwritable trace path" 1 "cannot write trace '/nonexistent-dir/t.json'" 4 \
    $cfg --layers 4 --batch 8 --micro-batches 4 --pp 2 --tp 2 --trace /nonexistent-dir/t.json
# A timeline onto a directory: the temporary file is written, the rename
# fails, and the temporary file is removed rather than left behind.
mkdir "$work/adir"
expect_error "timeline onto a directory" 1 "cannot write timeline '$work/adir': Is a directory" 4 \
    $cfg --layers 4 --batch 8 --micro-batches 4 --pp 2 --tp 2 --timeline "$work/adir"
left=$(ls -d "$work"/adir.* 2>/dev/null)
[ -z "$left" ] && ok "no temporary file left after a failed write" || not_ok "left behind: $left"
finish

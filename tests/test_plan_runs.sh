#!/bin/sh
# tests/test_plan_runs.sh - the planner (--plan, doc/design.md section 11) against
# the emulator's own runs: for tp2 pp2, pp4, pp2 dp2 and tp2 dp2 on 4
# classroom GPUs, tp2 pp2 dp2 on 8 (two servers: the pipeline crosses the
# network), ZeRO 1 and 2 on pp2 dp2, ZeRO 3 on tp2 dp2, selective and full
# recomputation on tp2 pp2, sequence parallelism on tp2 pp2, zb-v on pp2
# dp2, zb-h1 on tp2 pp2 and on one stage (where it runs as 1F1B), the planned
# worst-GPU memory equals
# --report memory's peak within 5% and the planned step time the run's
# virtual step time (the CSV's ms) within 2% (ZeRO 1 and 3, priced unit by
# unit as they run, to 1e-5). Planted faults: a plan on a
# cluster whose links are 10 times slower, and a plan of another schedule
# (gpipe), must miss. A cluster of fixed W costs alone plans zb-h1 as it
# runs. (tests/test_plan.sh checks the papers.)
. "$TT_SRCDIR/testlib.sh"

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

# plan NAME ARGS...: a pinned plan on one process, its JSON in $work/NAME.json.
plan() {
    name=$1
    shift
    rm -f "$work/$name.json"
    "$TT_BIN" --plan --plan-json "$work/$name.json" "$@" >"$work/out" 2>"$work/err"
    status=$?
}
# planned NAME: the last plan, NAME's, exited 0 and wrote its JSON (a failed
# plan fails its check outright: a stale JSON must never be judged)
planned() { [ "$status" -eq 0 ] && [ -s "$work/$1.json" ]; }

# Against the emulator (4 virtual GPUs of classroom, one step).
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
for lay in "2 2 1 0 none" "1 4 1 0 none" "1 2 2 0 none" "2 1 2 0 none" "2 2 2 0 none" \
           "1 2 2 1 none" "1 2 2 2 none" "2 1 2 3 none" "2 2 1 0 selective" "2 2 1 0 full" \
           "2 2 1 0 none --sequence-parallel" "1 2 2 0 none --schedule zb-v" \
           "2 2 1 0 none --schedule zb-h1" "1 1 2 0 none --schedule zb-h1" \
           "1 2 2 0 none --schedule interleaved"; do
    set -- $lay
    np=$(($1 * $2 * $3))
    shift 5
    extra="$*"
    set -- $lay
    rm -f "$work/log.csv"
    $TT_MPIRUN -np $np "$TT_BIN" --tp $1 --pp $2 --dp $3 --zero $4 --recompute $5 $extra $run --log "$work/log.csv" >"$work/run.out" 2>"$work/err"
    ran=$?
    what="tp$1 pp$2 dp$3 zero$4 recompute $5 $extra"
    if [ "$ran" -ne 0 ]; then
        not_ok "$what: the run exits $ran"
        continue
    fi
    # (the case's own flags last: a --schedule there replaces 1f1b)
    plan p --gpus $np --tp $1 --pp $2 --dp $3 --zero $4 --recompute $5 --micro-batches 4 --schedule 1f1b $extra
    if ! planned p; then not_ok "$what: the plan exits $status"
    elif msg=$(compare p 0.05 0.02 pass); then ok "$what: $msg"; else not_ok "$what: $msg"; fi
    # ZeRO 1's and 3's collectives run after the pipeline, unit by unit (a
    # block, the embeddings, the head), each paying the ring's latencies:
    # priced the same way, the plan is the run's step to the microsecond
    # (ZeRO 2's reduce-scatters run inside the pipeline: its 2% above).
    case $lay in "1 2 2 1 none" | "2 1 2 3 none")
        if planned p && msg=$(compare p 0.05 1e-5 pass); then ok "$what, unit by unit: $msg"
        else not_ok "$what, unit by unit: not the run's step: $msg"; fi ;;
    esac
    if [ "$lay" = "2 2 1 0 none" ]; then
        plan p --gpus 4 --tp $1 --pp $2 --dp $3 --zero 0 --recompute none --micro-batches 4 --schedule 1f1b --cluster "$work/slow.json"
        if ! planned p; then not_ok "planted fault, links 10x slower: the plan exits $status"
        elif msg=$(compare p 1 0.02 fail); then ok "planted fault, links 10x slower: $msg"; else not_ok "the time check passed a plan on another cluster: $msg"; fi
        plan p --gpus 4 --tp $1 --pp $2 --dp $3 --zero 0 --recompute none --micro-batches 4 --schedule gpipe
        if ! planned p; then not_ok "planted fault, gpipe's memory: the plan exits $status"
        elif msg=$(compare p 0.05 1 fail); then ok "planted fault, gpipe's memory: $msg"; else not_ok "the memory check passed another schedule: $msg"; fi
    fi
done

# A test cluster of fixed chunk costs, W's alone set (F and B then cost
# nothing but their links, in the run as in the plan): the plan of zb-h1
# on pp 2 is the run's step.
printf '{"based_on": "classroom", "fixed_w": 0.01}\n' > "$work/fixedw.json"
rm -f "$work/log.csv"
$TT_MPIRUN -np 2 "$TT_BIN" --pp 2 --schedule zb-h1 --cluster "$work/fixedw.json" $run --log "$work/log.csv" >"$work/run.out" 2>"$work/err"
ran=$?
plan p --gpus 2 --tp 1 --pp 2 --dp 1 --zero 0 --recompute none --micro-batches 4 --schedule zb-h1 --cluster "$work/fixedw.json"
if [ "$ran" -ne 0 ] || ! planned p; then not_ok "fixed W cost, zb-h1 pp2: run exit $ran, plan exit $status"
elif msg=$(compare p 1 0.02 pass); then ok "fixed W cost, zb-h1 pp2: $msg"; else not_ok "fixed W cost, zb-h1 pp2: $msg"; fi

finish

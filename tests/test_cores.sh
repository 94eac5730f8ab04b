#!/bin/sh
# tests/test_cores.sh - where the ranks run when a host has more ranks than
# cores (--pin-ranks, tt/comm/cores.h). Every run is limited to two CPUs with
# taskset and started with --bind-to none, so the host has the same two cores
# on any machine and mpirun binds nothing itself.
#  1. The rule, worked by hand from world_rank = tp_rank + tp*(dp_rank +
#     dp*pp_rank): tp 2 x dp 2 on 2 cores puts replica 0 (gpu0, gpu1) on the
#     first core and replica 1 (gpu2, gpu3) on the second; tp 2 x pp 3 x dp 2
#     puts gpu0 1 4 5 8 9 (dp 0) on the first and gpu2 3 6 7 10 11 on the
#     second (--show-grid's list).
#  2. The operating system agrees: while a 12-rank run trains, each rank's
#     Cpus_allowed_list (/proc) is one CPU, six ranks on each; with
#     --pin-ranks off each may use both.
#  3. Not bound, with the reason: --pin-ranks off, a replica of one rank
#     (dp 4), one replica on two cores (pp 4), and no line at all when the
#     ranks fit the cores.
#  4. The same checkpoint bits bound and not (tp 2 x dp 2 and tp 2 x pp 3 x
#     dp 2): placement changes where, never what.
#  5. A bad value is refused naming it.
#  6. The time slice: on the oversubscribed host each rank asks for 20 ms
#     (where the kernel grants it, Linux 6.12+, the first lines say so and
#     /proc/PID/sched shows se.slice 20000000 for all 12 ranks while they
#     train); TT_SLICE_MS=0 leaves the system's slice, says nothing, and
#     gives the same checkpoint bits. With a busy loop on each CPU the ranks
#     run on the system's slice, and on the long one again once the loops
#     end (src/comm/slice.c).
#  7. A TT_SLICE_MS that is not a whole number of ms from 0 to 100 is
#     refused naming it, on every rank, before any work.
#  8. A core whose ranks are done with their step lends itself to the ranks
#     still at work (src/comm/cores.c): a 12-rank run says how often (at
#     least once in 20 steps), TT_LEND_CORES=0 says nothing, both give the
#     same checkpoint bits, and the lent core is taken back: sampled while
#     a run trains, a sample after one with a lent core finds every rank
#     on its own core again (the lending would otherwise stay from the
#     first step's end on; the samples before the first lending prove
#     nothing). Part 2's
#     samples are taken with TT_LEND_CORES=0, the binding alone. A value
#     other than 0 or 1 is refused naming it, as in 7.
. "$TT_SRCDIR/testlib.sh"

# the first two CPUs this test may use
cpus=$(awk '/^Cpus_allowed_list/ { print $2 }' /proc/self/status 2>/dev/null)
two=$(python3 -c "
import sys
ids = []
for part in sys.argv[1].split(','):
    a, _, b = part.partition('-')
    ids += range(int(a), int(b or a) + 1)
print(','.join(map(str, ids[:2])) if len(ids) >= 2 else '')" "$cpus" 2>/dev/null)
if [ -z "$two" ] || ! command -v taskset >/dev/null 2>&1; then
    echo "SKIP: needs taskset and two CPUs (allowed: ${cpus:-unknown})"
    exit 77
fi
first=${two%,*} second=${two#*,}
small="--layers 3 --dim 16 --heads 2 --seq 8 --batch 12 --micro-batches 3 --steps 3
 --quiet --sample-len 0 --eval-every 0 --no-spot-check"

# on2 NP ARGS...: tt on the two CPUs, mpirun binding nothing
on2() {
    np=$1
    shift
    taskset -c "$two" $TT_MPIRUN $TT_MPI_NO_BIND -np "$np" "$TT_BIN" "$@" >"$work/out" 2>"$work/err"
    status=$?
}

# 1. the rule
on2 4 --show-grid --tp 2 --dp 2
if [ "$status" -eq 0 ] &&
   grep -qx "cores: 4 ranks share 2 cores on this host; each DP replica's 2 ranks are bound to one core (1 replica a core; with --pin-ranks off the OS would place them)" "$work/out" &&
   grep -qx "  core $first: gpu0(dp0,pp0,tp0) gpu1(dp0,pp0,tp1)" "$work/out" &&
   grep -qx "  core $second: gpu2(dp1,pp0,tp0) gpu3(dp1,pp0,tp1)" "$work/out"; then
    ok "tp 2 x dp 2 on 2 cores: replica 0 on core $first, replica 1 on core $second"
else
    not_ok "tp 2 x dp 2 placement"
fi
on2 12 --show-grid --tp 2 --pp 3 --dp 2
if [ "$status" -eq 0 ] &&
   grep -qx "  core $first: gpu0(dp0,pp0,tp0) gpu1(dp0,pp0,tp1) gpu4(dp0,pp1,tp0) gpu5(dp0,pp1,tp1) gpu8(dp0,pp2,tp0) gpu9(dp0,pp2,tp1)" "$work/out" &&
   grep -qx "  core $second: gpu2(dp1,pp0,tp0) gpu3(dp1,pp0,tp1) gpu6(dp1,pp1,tp0) gpu7(dp1,pp1,tp1) gpu10(dp1,pp2,tp0) gpu11(dp1,pp2,tp1)" "$work/out"; then
    ok "tp 2 x pp 3 x dp 2 on 2 cores: each replica's six GPUs on one core"
else
    not_ok "tp 2 x pp 3 x dp 2 placement"
fi

# 2. what the operating system says, while a run trains.
# long_run ARGS...: tp 2 x pp 3 x dp 2 on the two CPUs with ARGS, training
# until stopped (stop_long ARGS...), started in the background; returns
# once all 12 ranks are in the training steps (their banner is out).
long_run() {
    taskset -c "$two" $TT_MPIRUN $TT_MPI_NO_BIND -np 12 "$TT_BIN" --tp 2 --pp 3 --dp 2 "$@" \
        --steps 100000 --sample-len 0 --eval-every 0 --no-spot-check --quiet \
        >"$work/out" 2>"$work/err" &
    job=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q '^steps 0' "$work/out" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
}
stop_long() {
    kill "$job" 2>/dev/null
    pkill -f -- "--tp 2 --pp 3 --dp 2 $*" 2>/dev/null
    wait "$job" 2>/dev/null
    # until its ranks are gone: the next run's samples match the same words
    # (a bound run's last two ranks, still exiting, were once read as those
    # of the --pin-ranks off run after it)
    i=0
    while [ $i -lt 100 ] && pgrep -f -- "--tp 2 --pp 3 --dp 2 $*" >/dev/null 2>&1; do
        sleep 0.1
        i=$((i + 1))
    done
}
# of_ranks FILE AWK ARGS...: AWK over /proc/PID/FILE of each rank of the
# long run started with ARGS (the program under any libtool wrapper, not
# mpirun)
of_ranks() {
    file=$1 prog=$2
    shift 2
    for p in $(pgrep -f -- "--tp 2 --pp 3 --dp 2 $*" 2>/dev/null); do
        case $(cat "/proc/$p/comm" 2>/dev/null) in
            tiny_transforme*|lt-tiny_transfo*) awk "$prog" "/proc/$p/$file" 2>/dev/null ;;
        esac
    done
}
# allowed FLAGS...: the ranks' Cpus_allowed_list values, counted ("6x0,6x1")
tiny="--layers 3 --dim 16 --heads 2 --seq 8 --batch 12 --micro-batches 3"
allowed() {
    long_run $tiny "$@"
    of_ranks status '/^Cpus_allowed_list/ { print $2 }' $tiny > "$work/aff"
    of_ranks sched '$1 == "se.slice" { print $3 }' $tiny > "$work/slices"
    stop_long $tiny
    sort "$work/aff" | uniq -c | awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }'
}
export TT_LEND_CORES=0
got=$(allowed)
unset TT_LEND_CORES
if [ "$got" = "6x$first,6x$second" ]; then
    ok "bound: six ranks may run only on CPU $first, six only on CPU $second ($got)"
else
    not_ok "bound: Cpus_allowed_list of the 12 ranks: '$got', expected 6x$first,6x$second"
fi
got=$(allowed --pin-ranks off)
if [ "$got" = "12x$two" ] || [ "$got" = "12x$first-$second" ]; then
    ok "--pin-ranks off: every rank may run on both CPUs ($got)"
else
    not_ok "--pin-ranks off: Cpus_allowed_list of the 12 ranks: '$got', expected 12x$two"
fi

# 3. not bound, and why
for case in "4|--tp 2 --dp 2 --pin-ranks off|--pin-ranks off" \
            "4|--dp 4 --batch 16 --micro-batches 4|each DP replica is a single rank" \
            "4|--pp 4 --layers 4|the replicas do not divide evenly among the cores"; do
    np=${case%%|*} rest=${case#*|}
    flags=${rest%%|*} why=${rest#*|}
    on2 "$np" $small $flags
    if [ "$status" -eq 0 ] &&
       grep -qx "cores: $np ranks share 2 cores on this host, placed by the operating system (not bound: $why)" "$work/out"; then
        ok "$flags: not bound ($why)"
    else
        not_ok "$flags: expected 'not bound: $why'"
    fi
done
on2 2 $small --dp 2
if [ "$status" -eq 0 ] && ! grep -q "^cores:" "$work/out"; then
    ok "2 ranks on 2 cores: nothing to place, nothing said"
else
    not_ok "2 ranks on 2 cores said something about cores"
fi

# 4. the same bits
for case in "4|--tp 2 --dp 2" "12|--tp 2 --pp 3 --dp 2"; do
    np=${case%%|*} flags=${case#*|}
    on2 "$np" $small $flags --save "$work/bound.ckpt"
    s1=$status
    on2 "$np" $small $flags --pin-ranks off --save "$work/free.ckpt"
    if [ "$s1" -eq 0 ] && [ "$status" -eq 0 ] && cmp -s "$work/bound.ckpt" "$work/free.ckpt"; then
        ok "$flags: the same checkpoint bound and not"
    else
        not_ok "$flags: checkpoints differ bound and not (or a run failed: $s1 $status)"
    fi
done

# 5. a bad value
expect_error "--pin-ranks always" 2 "always" 2 --pin-ranks always --steps 1


# 6. the time slice. TT_SLICE_MS is exported and unset around the runs
# that take it, not put before on2: an assignment before a shell function
# is exported or not, and stays after the call or not, by shell (older bash
# as sh keeps it, and the 20 ms runs after it would take 0). A value the
# caller's environment brought would move the 20 ms expected here: dropped.
unset TT_SLICE_MS
slice_of() { awk '$1 == "se.slice" { print $3 }' /proc/self/sched 2>/dev/null; }
own=$(slice_of)
on2 12 --show-grid --tp 2 --pp 3 --dp 2
said=$(grep -c "^cores: each rank may run 20 ms before the next one sharing its core, while no other program keeps these cores busy (TT_SLICE_MS=0: the system's time slice)$" "$work/out")
export TT_SLICE_MS=0
on2 12 --show-grid --tp 2 --pp 3 --dp 2
unset TT_SLICE_MS
if [ "$status" -eq 0 ] && ! grep -q "^cores: each rank may run" "$work/out"; then
    ok "TT_SLICE_MS=0: no time slice asked for, nothing said"
else
    not_ok "TT_SLICE_MS=0: a slice was still reported (or the run failed: $status)"
fi
if [ -z "$own" ]; then
    ok "# SKIP the ranks' time slices: this kernel shows no se.slice in /proc/PID/sched"
elif [ "$said" -eq 1 ]; then
    allowed >/dev/null
    got=$(sort "$work/slices" | uniq -c | awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }')
    if [ "$got" = "12x20000000" ]; then
        ok "each of the 12 ranks trains with a 20 ms slice ($got), as the first lines say"
    else
        not_ok "the ranks' se.slice: '$got', expected 12x20000000"
    fi
    export TT_SLICE_MS=0
    allowed >/dev/null
    unset TT_SLICE_MS
    got=$(sort "$work/slices" | uniq -c | awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }')
    if [ "$got" = "12x$own" ]; then
        ok "TT_SLICE_MS=0: the ranks keep the system's slice ($got)"
    else
        not_ok "TT_SLICE_MS=0: the ranks' se.slice '$got', expected 12x$own"
    fi
    # 6b. Given up while other programs keep the cores busy: with a busy
    # loop on each of the two CPUs the ranks run on the system's slice (a
    # rank with the long one, woken beside a busy program, waits behind it),
    # and once the loops end they take the long one back.
    long_run $tiny
    hogs=""
    # (killed whatever ends this test: a timeout must not leave them spinning)
    trap 'kill $hogs 2>/dev/null; rm -rf "$work"' EXIT
    trap 'exit 1' INT TERM
    for c in $(echo "$two" | tr ',' ' '); do
        taskset -c "$c" sh -c 'while :; do :; done' &
        hogs="$hogs $!"
    done
    sleep 3
    busy=$(of_ranks sched '$1 == "se.slice" { print $3 }' $tiny | sort | uniq -c |
        awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }')
    kill $hogs 2>/dev/null
    wait $hogs 2>/dev/null
    sleep 3
    back=$(of_ranks sched '$1 == "se.slice" { print $3 }' $tiny | sort | uniq -c |
        awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }')
    stop_long $tiny
    if [ "$busy" = "12x$own" ] && [ "$back" = "12x20000000" ]; then
        ok "two busy loops on the cores: the ranks take the system's slice ($busy), and the 20 ms one back after them ($back)"
    else
        not_ok "busy loops on the cores: the ranks' se.slice '$busy' with them (expected 12x$own), '$back' after (expected 12x20000000)"
    fi
elif [ "$(uname -r | awk -F. '{ print ($1 > 6 || ($1 == 6 && $2 >= 12)) }')" = 1 ]; then
    not_ok "Linux $(uname -r) grants a thread its time slice, but the first lines say none was asked for"
else
    ok "# SKIP the ranks' time slices: Linux $(uname -r) does not grant one (the first lines say none)"
fi
on2 12 $small --tp 2 --pp 3 --dp 2 --save "$work/slice.ckpt"
s1=$status
export TT_SLICE_MS=0
on2 12 $small --tp 2 --pp 3 --dp 2 --save "$work/noslice.ckpt"
unset TT_SLICE_MS
if [ "$s1" -eq 0 ] && [ "$status" -eq 0 ] && cmp -s "$work/slice.ckpt" "$work/noslice.ckpt"; then
    ok "the same checkpoint with the 20 ms slice and the system's"
else
    not_ok "checkpoints differ with and without the slice (or a run failed: $s1 $status)"
fi

# 7. a TT_SLICE_MS that is not a whole number of ms from 0 to 100 is refused
# by name (exit 2, one message) on every rank, before any work.
for bad in abc 101 -1 5x ' 5' +5; do
    export TT_SLICE_MS=$bad
    expect_error "TT_SLICE_MS=$bad" 2 "^tiny_transformer: TT_SLICE_MS='$bad' in the environment: the time slice each rank asks for on shared cores, in whole ms from 0 (the system's) to 100$" 3 --pp 3 --steps 1
    unset TT_SLICE_MS
done

# 8. lending a core at a step's end
unset TT_LEND_CORES
on2 12 $small --tp 2 --pp 3 --dp 2 --steps 20 --save "$work/lend.ckpt"
s1=$status
k=$(sed -n 's/^cores: a core whose ranks were done with their step lent itself to the ranks still at work \([0-9]*\) times\{0,1\} in 20 steps (TT_LEND_CORES=0: never)$/\1/p' "$work/out")
if [ "$s1" -eq 0 ] && [ -n "$k" ] && [ "$k" -ge 1 ]; then
    ok "12 ranks on 2 cores: a core lent itself $k times in 20 steps"
else
    not_ok "no lending reported in 20 steps (exit $s1): $(grep '^cores' "$work/out")"
fi
export TT_LEND_CORES=0
on2 12 $small --tp 2 --pp 3 --dp 2 --steps 20 --save "$work/nolend.ckpt"
unset TT_LEND_CORES
if [ "$status" -eq 0 ] && ! grep -q "lent itself" "$work/out" &&
   cmp -s "$work/lend.ckpt" "$work/nolend.ckpt"; then
    ok "TT_LEND_CORES=0: no lending, nothing said, the same checkpoint bits"
else
    not_ok "TT_LEND_CORES=0: lending reported, or the checkpoints differ (exit $status)"
fi
# samples of the ranks' allowed CPUs while a long run trains with lending,
# on the default model (on part 2's tiny one the end of a step, when cores
# are lent, is most of the step). Taken back: a sample with every rank on
# its own core after one with a rank allowed both CPUs (the first samples
# may come before any lending). Such samples are a fraction of them (11 of
# 40 under Open MPI here, 5 of 40 under MPICH, whose ranks spend longer at
# the step's end): up to 60 samples, 0.1 s apart, until one is found.
[ "$second" -eq $((first + 1)) ] && both="$first-$second" || both="$first,$second"
home_after_lent() {
    awk -v home="6x$first,6x$second" -v both="x$both" '
        { lent = index($0 "," , both ",") > 0 }
        lent { seen = 1 }
        !lent && $0 == home && seen { n++ }
        END { print n + 0 }' "$work/samples"
}
long_run
: > "$work/samples"
n=0
while [ $n -lt 60 ] && [ "$(home_after_lent)" -eq 0 ]; do
    of_ranks status '/^Cpus_allowed_list/ { print $2 }' --steps 100000 | sort | uniq -c |
        awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," } END { print "" }' >> "$work/samples"
    sleep 0.1
    n=$((n + 1))
done
stop_long --steps 100000
home=$(home_after_lent)
if [ "$home" -ge 1 ]; then
    ok "the lent core is taken back: $home of $(grep -c . "$work/samples") samples after a lent one find every rank on its own core (in order: $(tr '\n' ' ' < "$work/samples"))"
else
    not_ok "the lent core is not taken back: no sample after a lent one finds every rank on its own core (in order: $(tr '\n' ' ' < "$work/samples"))"
fi
for bad in yes 2; do
    export TT_LEND_CORES=$bad
    expect_error "TT_LEND_CORES=$bad" 2 "^tiny_transformer: TT_LEND_CORES='$bad' in the environment: whether a core whose ranks are done with their step lends itself to the ranks still at work, 1 (the default) or 0$" 3 --pp 3 --steps 1
    unset TT_LEND_CORES
done

finish

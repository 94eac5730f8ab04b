#!/bin/sh
# tests/test_crash_rerun.sh - crash and rerun with --resume auto: a run killed
# with kill -9 of one rank (rank 1, and separately rank 0) in the middle of
# its steps, or of rank 1 inside a save, then the very same command again,
# ends with a final checkpoint bit-identical (cmp) to an uninterrupted run's,
# and no temporary file in the directory. The independent reason: a resumed
# run repeats the same arithmetic (test_resume.sh), so any difference is a
# checkpoint that was not the last complete one, or a partial file taken for
# one. Also: a damaged checkpoint is refused and kept, stale temporaries of
# the output are removed and nothing else is, the killed job's other rank
# ends within 20 s (the figures are printed; seconds are usual), and a save
# never replaces a checkpoint another program has put there meanwhile.
. "$TT_SRCDIR/testlib.sh"

# 100 steps of a few ms each: a kill after the first save (step 25) lands
# well before the end; the save of step 50 is the one a test pauses in.
cfg="--layers 2 --dim 64 --heads 4 --seq 64 --batch 8 --micro-batches 2 --warmup 3 --sample-len 0 --eval-every 0 --no-spot-check --pp 2 --steps 100 --save-every 25"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# run DIR: the command every run of this test is, in DIR (stdout, stderr and
# status in DIR/out, DIR/err, $status).
run() {
    $TT_MPIRUN -np 2 "$TT_BIN" $cfg --save "$1/run.st" --resume auto >"$1/out" 2>"$1/err"
    status=$?
}

# The uninterrupted run.
mkdir "$work/full"
run "$work/full"
if [ "$status" -eq 0 ] && grep -q "^--resume auto: no checkpoint '.*run.st' yet: starting from step 0$" "$work/full/out"; then
    ok "uninterrupted run to step 100, saying it starts afresh"
else
    not_ok "uninterrupted run: exit $status"; cat "$work/full/err"
fi

# crash NAME RANK WHEN: runs the command in $work/NAME, kills RANK with
# kill -9 when the shell condition WHEN holds, and records how long the job
# took to end after that.
crash() {
    d="$work/$1"
    mkdir -p "$d"
    $TT_MPIRUN -np 2 "$TT_BIN" $cfg --save "$d/run.st" --resume auto >"$d/out" 2>"$d/err" &
    mpi=$!
    if ! wait_for "$3"; then
        not_ok "$1: the moment to kill never came"
        kill -9 "$mpi" 2>/dev/null
        wait "$mpi"
        return 1
    fi
    victim=$(rank_pid "$mpi" "$2")
    other=$(rank_pid "$mpi" $((1 - $2)))
    t0=$(now)
    kill -9 "$victim"
    # Ended: gone, or a zombie (mpirun has not reaped it yet); within 20 s
    # (seconds are expected: the limit only tells a hang from a slow machine).
    polls=0
    while [ -e "/proc/$other" ] && ! grep -q '^[0-9]* (.*) Z' "/proc/$other/stat" 2>/dev/null &&
        [ "$polls" -lt 2000 ]; do
        sleep 0.01
        polls=$((polls + 1))
    done
    t1=$(now)
    if [ "$polls" -ge 2000 ]; then
        not_ok "$1: rank $2 killed, and the other rank still runs $(secs "$t0" "$t1") s later"
        kill -9 "$mpi" "$other" 2>/dev/null
        wait "$mpi"
        return 1
    fi
    wait "$mpi"
    killed_status=$?
    t2=$(now)
    ended="the other rank ended $(secs "$t0" "$t1") s after the kill, mpirun $(secs "$t0" "$t2") s (exit $killed_status)"
    if [ "$killed_status" -ne 0 ]; then
        ok "$1: rank $2 killed; $ended"
    else
        not_ok "$1: the killed job exited 0"
    fi
}

# rerun NAME: the same command again must finish the run; its checkpoint is
# the uninterrupted run's, and the directory holds nothing else.
rerun() {
    d="$work/$1"
    run "$d"
    from=$(sed -n "s/^--resume auto: continuing from checkpoint '.*run.st' at step \([0-9]*\)$/\1/p" "$d/out")
    if [ "$status" -ne 0 ]; then
        not_ok "$1: rerun exit $status"
    elif [ -z "$from" ] || [ "$from" -le 0 ] || [ "$from" -ge 100 ] || [ $((from % 25)) -ne 0 ]; then
        not_ok "$1: rerun did not continue from a mid-run checkpoint (step '${from}')"
    elif ! cmp -s "$work/full/run.st" "$d/run.st"; then
        not_ok "$1: final checkpoint differs from the uninterrupted run's: $(cmp "$work/full/run.st" "$d/run.st")"
    elif [ "$(ls "$d" | grep -c '\.tmp\.')" -ne 0 ]; then
        not_ok "$1: temporaries left: $(ls "$d" | grep '\.tmp\.')"
    else
        ok "$1: rerun continued from step $from; final checkpoint cmp-equal to the uninterrupted run's; no temporary left"
    fi
}

# 1-2. Killed between saves (after the first, long before the end).
crash mid-rank1 1 '[ -f "$d/run.st" ]' && rerun mid-rank1
crash mid-rank0 0 '[ -f "$d/run.st" ]' && rerun mid-rank0

# 3. Killed inside the save of step 50: its temporary is written, the
#    checkpoint of step 25 still under the name (the test hook pauses there).
d="$work/in-save"
export TT_TEST_PAUSE_IN_SAVE=50
crash in-save 1 'grep -q "test hook: the save of step 50 pauses" "$d/err" 2>/dev/null'
unset TT_TEST_PAUSE_IN_SAVE
stale=$(ls "$d" | grep '^run\.st\.tmp\.[0-9][0-9]*$')
tmps=$(echo $stale | wc -w)
if [ "$tmps" -eq 1 ]; then
    ok "in-save: the kill left the save's temporary $stale"
else
    not_ok "in-save: $tmps temporaries after the kill inside the save, expected 1"
fi
# Files the cleanup must not touch: not our pattern for this output, or a
# live process's temporary.
for f in run.st.tmp.12x run.st.tmp. other.st.tmp.999999 run.st.tmp.$$ run.stx.tmp.999999; do
    echo keep > "$d/$f"
done
rerun_keep="run.st.tmp.12x run.st.tmp. other.st.tmp.999999 run.st.tmp.$$ run.stx.tmp.999999"
run "$d"
from=$(sed -n "s/^--resume auto: continuing from checkpoint '.*run.st' at step \([0-9]*\)$/\1/p" "$d/out")
kept=0
for f in $rerun_keep; do [ -f "$d/$f" ] && kept=$((kept + 1)); done
if [ "$status" -eq 0 ] && [ "$from" = 25 ] && cmp -s "$work/full/run.st" "$d/run.st" &&
    ! [ -e "$d/$stale" ] && [ "$kept" -eq 5 ] &&
    grep -q "^removed '.*run.st.tmp.[0-9]*', the temporary of an interrupted write of '.*run.st'$" "$d/out"; then
    ok "in-save: rerun removed the stale temporary, continued from step 25 (not the partial file), final checkpoint cmp-equal; the 5 other files kept"
else
    not_ok "in-save: rerun exit $status from step '$from', kept $kept of 5: $(ls "$d")"
fi

# 3b. Killed in the first save: no checkpoint, only a temporary - even one
#     holding a complete checkpoint (here a copy of the final one) is not
#     continued from: the run starts at step 0 and removes it.
d="$work/first-save"
mkdir -p "$d"
dead=$(sh -c 'echo $$')
cp "$work/full/run.st" "$d/run.st.tmp.$dead"
$TT_MPIRUN -np 2 "$TT_BIN" $cfg --save "$d/run.st" --resume auto --stop-at 1 >"$d/out" 2>"$d/err"
status=$?
if [ "$status" -eq 0 ] && grep -q "starting from step 0$" "$d/out" && ! [ -e "$d/run.st.tmp.$dead" ] &&
    grep -q "^removed '.*run.st.tmp.$dead'" "$d/out"; then
    ok "only a temporary there (a complete one): started from step 0 and removed it"
else
    not_ok "only a temporary there: exit $status: $(head -1 "$d/out"); $(ls "$d")"
fi

# 4. A damaged checkpoint is refused by every rank, exit 1, and kept as it
#    is: truncated (its header unreadable), then one flipped byte in the data
#    (the checksum), each in a fresh directory holding only that file.
cp "$work/full/run.st" "$work/good.st"
size=$(wc -c < "$work/good.st")
for damage in truncated flipped; do
    d="$work/$damage"
    mkdir -p "$d"
    if [ "$damage" = truncated ]; then
        head -c 5000 "$work/good.st" > "$d/run.st"
    else
        cp "$work/good.st" "$d/run.st"
        printf '\377' | dd of="$d/run.st" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null
    fi
    cp "$d/run.st" "$work/before.st"
    echo "resume auto: checkpoint '$d/run.st' exists but cannot be continued from (kept as it is" > "$work/want.truncated"
    echo "checkpoint '$d/run.st': checksum mismatch" > "$work/want.flipped"
    expect_error "--resume auto with a $damage checkpoint" 1 "$(cat "$work/want.$damage")" 2 $cfg --save "$d/run.st" --resume auto
    if cmp -s "$work/before.st" "$d/run.st" && [ "$(ls "$d" | wc -l)" -eq 1 ]; then
        ok "$damage checkpoint kept byte for byte, nothing else written"
    else
        not_ok "$damage checkpoint changed or files added: $(ls "$d")"
    fi
done
expect_error "--resume auto without --save" 2 "resume auto needs --save" 2 $cfg --resume auto

# Two runs saving to one file (a job started twice, a requeue beside the old
# job) overwrote each other's steps: an older over a newer. Here another
# program replaces the checkpoint after the run's first save (step 25); the
# run's next save must refuse, keep what is there and put its own beside it.
# (400 steps, a save every 25: the replacement lands well before the last.)
d="$work/twice"
mkdir -p "$d"
cp "$work/full/run.st" "$work/other.st"
long=$(echo "$cfg" | sed 's/--steps 100/--steps 400/')
$TT_MPIRUN -np 2 "$TT_BIN" $long --save "$d/run.st" --resume auto >"$d/out" 2>"$d/err" &
job=$!
i=0
while [ ! -f "$d/run.st" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
cp "$work/other.st" "$d/new" && mv "$d/new" "$d/run.st"
wait $job
status=$?
kept=$(ls "$d" | grep '^run\.st\.kept\.[0-9]*$')
want="cannot write checkpoint '$d/run.st': another program has replaced it since this run last saved it (two runs saving to one file?); it is kept, and this save is beside it as '$d/$kept'"
step=$(python3 -c "
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
print(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['step'])" "$d/$kept" 2>/dev/null)
if [ "$status" -eq 1 ] && [ "$(grep -c . "$d/err")" -ge 1 ] && [ "$(head -n 1 "$d/err")" = "tiny_transformer: $want" ] &&
    [ "$(grep -c '^tiny_transformer' "$d/err")" -eq 1 ] && cmp -s "$work/other.st" "$d/run.st" &&
    [ -n "$kept" ] && [ "$step" -gt 25 ] 2>/dev/null && [ "$(ls "$d" | grep -c tmp)" -eq 0 ]; then
    ok "a checkpoint replaced by another program after the run's first save: kept; the run's step $step beside it; $want"
else
    not_ok "checkpoint replaced mid-run: exit $status, other kept $(cmp -s "$work/other.st" "$d/run.st" && echo yes || echo no), beside it '$kept' (step '$step'): $(head -n 1 "$d/err")"
fi
rm -f "$d"/run.st*
# The same when the file is made under a run that had none yet (one rank,
# one save at its end); and a file removed meanwhile protects nothing.
one="--layers 2 --dim 64 --heads 4 --seq 64 --batch 8 --sample-len 0 --eval-every 0 --steps 600"
for how in made removed; do
    [ $how = removed ] && cp "$work/other.st" "$d/run.st"
    "$TT_BIN" $one --save "$d/run.st" >"$d/out" 2>"$d/err" &
    job=$!
    i=0
    while ! grep -q '^step ' "$d/out" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    if [ $how = made ]; then cp "$work/other.st" "$d/run.st"; else rm "$d/run.st"; fi
    wait $job
    status=$?
    if [ $how = made ] && [ "$status" -eq 1 ] && grep -q "another program has made it since this run began" "$d/err" &&
        cmp -s "$work/other.st" "$d/run.st" && [ "$(ls "$d" | grep -c '^run\.st\.kept\.')" -eq 1 ]; then
        ok "a checkpoint made by another program under a 1-rank run: kept, the run's own beside it"
    elif [ $how = removed ] && [ "$status" -eq 0 ] && [ -f "$d/run.st" ] && ! cmp -s "$work/other.st" "$d/run.st"; then
        ok "a checkpoint removed under a 1-rank run: the run saves in its place"
    else
        not_ok "checkpoint $how mid-run, 1 rank: exit $status: $(head -n 1 "$d/err"); $(ls "$d")"
    fi
    rm -f "$d"/run.st*
done

# A checkpoint replaced between the resume's read of its header at start-up
# (the step, the model and the hyper-parameters the run adopts) and the load
# of its weights: the run would train step 100's weights as step 26. The
# test hook pauses every rank in between; the file is replaced there, and
# every rank stops with status 1 and one line, loading nothing.
d="$work/swap"
mkdir -p "$d"
$TT_MPIRUN -np 2 "$TT_BIN" $cfg --stop-at 26 --save "$d/a.st" >"$d/out" 2>"$d/err"
export TT_TEST_PAUSE_BEFORE_LOAD=5
tt_each 2 $cfg --resume "$d/a.st" --save "$d/b.st" &
job=$!
unset TT_TEST_PAUSE_BEFORE_LOAD
wait_for 'grep -q "test hook: the resume pauses" "$work/err" 2>/dev/null' &&
    cp "$work/full/run.st" "$d/new" && mv "$d/new" "$d/a.st"
wait $job
want="tiny_transformer: checkpoint '$d/a.st' changed after this run read its header (another program replaced it): nothing was loaded; start the run again"
if [ "$(rank_statuses)" = "2x1" ] && grep -qxF "$want" "$work/err" && [ ! -e "$d/b.st" ] &&
    [ "$(grep -c '^tiny_transformer' "$work/err")" -eq 2 ]; then
    ok "checkpoint replaced between the header's read and the load: both ranks exit 1, one line, nothing saved"
else
    not_ok "checkpoint replaced before the load: statuses $(rank_statuses); $(cat "$work/err")"
fi
finish

#!/bin/sh
# tests/test_outputs.sh - outputs never destroy good data (doc/design.md
# section 7): every output path (--save, --log, --trace, --timeline) is
# checked by every rank before the first step, so a wrong one stops the run
# with exit 1 on every rank and one line on stderr, and the file it named is
# left exactly as it was (checksum before and after). Each case runs on 1
# and on 2 ranks. Then what happens at the end of a run: the checkpoint is
# written before the trace, a trace path that became a directory during the
# run is refused at the rename, a log or a checkpoint the disk has no room
# for fails the run (the checkpoint before it is written, with one line),
# and a killed run's log ends with a whole row. A trace, timeline or plot
# never replaces a training log. --steps 0 refuses --trace, --timeline and
# --plot; a resumed run at its end writes none of them and exits 0.
. "$TT_SRCDIR/testlib.sh"

small="--layers 1 --dim 16 --heads 2 --seq 16 --batch 2 --micro-batches 1 --steps 1 --sample-len 0 --quiet"

# The inputs and a checkpoint to protect.
head -c 40000 "$TT_SRCDIR/../doc/design.md" >"$work/data.txt"
tt 1 $small --data "$work/data.txt" --save "$work/ck.st"
[ "$status" -eq 0 ] && ok "a checkpoint to protect" || not_ok "making the checkpoint: exit $status"
ln "$work/data.txt" "$work/hard.txt"
ln -s "$work/data.txt" "$work/link.txt"
mkdir "$work/adir"
mkfifo "$work/fifo"

sum() { cksum <"$1"; }

# refused WHAT PATTERN PROTECTED ARGS...: on 1 and on 2 ranks, exit 1
# everywhere, one line on stderr matching PATTERN, PROTECTED unchanged (its
# checksum; for a non-regular file, its type) and no temporary left.
refused() {
    label=$1 pattern=$2 keep=$3
    shift 3
    for n in 1 2; do
        # (a path that does not exist stays empty: a file made there changes it)
        before=$(ls -ld "$keep" 2>/dev/null | cut -c1); [ -f "$keep" ] && before=$(sum "$keep")
        expect_error "$label ($n rank(s))" 1 "$pattern" "$n" $small "$@"
        after=$(ls -ld "$keep" 2>/dev/null | cut -c1); [ -f "$keep" ] && after=$(sum "$keep")
        [ "$before" = "$after" ] && ok "$label ($n rank(s)): '$keep' unchanged" \
            || not_ok "$label ($n rank(s)): '$keep' changed"
    done
    left=$(ls "$work" | grep '\.tmp\.')
    [ -z "$left" ] || not_ok "$label: temporary files left: $left"
}

d="--data $work/data.txt"
refused "--save onto --data" "--save: cannot write checkpoint '$work/data.txt': it is the same file as --data" \
    "$work/data.txt" $d --save "$work/data.txt"
refused "--save onto --data under another name" "it is the same file as --data" \
    "$work/data.txt" $d --save "$work/adir/../data.txt"
refused "--log onto a hard link of --data" "--log: cannot write log '$work/hard.txt': it is the same file as --data" \
    "$work/data.txt" $d --log "$work/hard.txt"
refused "--log onto --resume" "--log: cannot write log '$work/ck.st': it is the same file as --resume" \
    "$work/ck.st" --resume "$work/ck.st" --log "$work/ck.st"
refused "--log onto an existing checkpoint given to --save" "it is the same file as --log" \
    "$work/ck.st" --save "$work/ck.st" --log "$work/ck.st"
# A cluster file is an input too (a built-in's name is not a file).
printf '{"based_on": "classroom"}\n' > "$work/c.json"
refused "--log onto --cluster" "--log: cannot write log '$work/c.json': it is the same file as --cluster" \
    "$work/c.json" --cluster "$work/c.json" --log "$work/c.json"
refused "--trace onto --cluster" "--trace: cannot write trace '$work/c.json': it is the same file as --cluster" \
    "$work/c.json" --cluster "$work/c.json" --trace "$work/c.json"
# The planner's JSON was checked alone, so it replaced its inputs (--data
# too, which --plan now refuses: test_plan.sh).
for input in cluster resume; do
    # (the checkpoint brings its own model)
    if [ $input = cluster ]; then f=$work/c.json m="--layers 2 --dim 32 --heads 4"; else f=$work/ck.st m=; fi
    before=$(sum "$f")
    expect_error "--plan-json onto --$input" 1 "^tiny_transformer: --plan-json: cannot write the plan '$f': it is the same file as --$input" 1 \
        --plan --gpus 2 $m --$input "$f" --plan-json "$f"
    [ "$(sum "$f")" = "$before" ] && ok "--plan-json onto --$input: '$f' unchanged" || not_ok "--plan-json onto --$input: '$f' changed"
done
# A checkpoint no flag names is still a run's training: a log, trace or
# timeline never replaces one (a mistyped name must not cost it).
refused "--log onto an unnamed checkpoint" "--log: cannot write log '$work/ck.st': it is a checkpoint" \
    "$work/ck.st" --log "$work/ck.st"
refused "--trace onto an unnamed checkpoint" "--trace: cannot write trace '$work/ck.st': it is a checkpoint" \
    "$work/ck.st" --trace "$work/ck.st"
refused "--timeline onto an unnamed checkpoint" "--timeline: cannot write timeline '$work/ck.st': it is a checkpoint" \
    "$work/ck.st" --timeline "$work/ck.st"
# Nor does a trace, timeline or plot replace a training log: "--plot a.csv
# b.csv", the chart's name forgotten, turned log a.csv into a chart.
tt 1 $small --log "$work/old.csv"
cp "$work/old.csv" "$work/old2.csv"
refused "--trace onto a log" "--trace: cannot write trace '$work/old.csv': it is a training log (a --log CSV); choose another name" \
    "$work/old.csv" --trace "$work/old.csv"
refused "--timeline onto a log" "--timeline: cannot write timeline '$work/old.csv': it is a training log (a --log CSV); choose another name" \
    "$work/old.csv" --timeline "$work/old.csv"
refused "--plot onto a log" "--plot: cannot write plot '$work/old.csv': it is a training log" \
    "$work/old.csv" --plot "$work/old.csv"
before=$(sum "$work/old.csv")
for np in 1 2; do
    expect_error "--plot a.csv b.csv, the chart's name forgotten ($np rank(s))" 1 \
        "^tiny_transformer: --plot: cannot write plot '$work/old.csv': it is a training log (a --log CSV); the chart's name comes first: --plot OUT.svg a.csv b.csv$" \
        "$np" --plot "$work/old.csv" "$work/old2.csv"
done
[ "$(sum "$work/old.csv")" = "$before" ] && ok "--plot a.csv b.csv: a.csv unchanged" || not_ok "--plot a.csv b.csv: a.csv changed"
# The other way round: --save replaced any regular file, so a mistyped name
# cost a text or a log its contents. It replaces a checkpoint or an empty
# file only.
echo "notes that are no checkpoint" >"$work/notes.txt"
refused "--save onto a file that is not a checkpoint" "--save: cannot write checkpoint '$work/notes.txt': it exists and is not a checkpoint" \
    "$work/notes.txt" --save "$work/notes.txt"
: >"$work/empty.st"
tt 1 $small --save "$work/empty.st"
[ "$status" -eq 0 ] && [ -s "$work/empty.st" ] && ok "--save onto an empty file writes the checkpoint" \
    || not_ok "--save onto an empty file: exit $status"
refused "--trace onto --save" "--save: cannot write checkpoint '$work/new.st': it is the same file as --trace" \
    "$work/new.st" --save "$work/new.st" --trace "$work/new.st"
refused "--timeline onto a symbolic link" "--timeline: cannot write timeline '$work/link.txt': is a symbolic link" \
    "$work/data.txt" --timeline "$work/link.txt"
# --resume auto reads the --save file first: a link there is refused as
# --save refuses it, with nothing said before (it said "continuing from" a
# good link's checkpoint, then refused; a dangling link "existed but could
# not be continued from: No such file or directory").
ln -s "$work/ck.st" "$work/cklink.st"
ln -s "$work/nowhere/x.st" "$work/dangling.st"
for link in cklink dangling; do
    refused "--resume auto onto a symbolic link ($link)" "^tiny_transformer: --save: cannot write checkpoint '$work/$link.st': is a symbolic link (name the file itself)$" \
        "$work/ck.st" --resume auto --save "$work/$link.st"
    grep -q "continuing" "$work/out" && not_ok "--resume auto onto $link: said it was continuing" ||
        ok "--resume auto onto $link: no word of continuing"
done
refused "--log onto a FIFO" "--log: cannot write log '$work/fifo': is a FIFO, not a regular file" \
    "$work/fifo" --log "$work/fifo"
refused "--trace onto a directory" "--trace: cannot write trace '$work/adir': Is a directory" \
    "$work/adir" --trace "$work/adir"
# A file with no write permission is protected on purpose: the rename that
# replaces an output needs only the directory's, so it was replaced anyway
# (with the run's mode), even as another user. Refused, to root too.
cp "$work/ck.st" "$work/ro.st"
chmod a-w "$work/ro.st"
refused "--save onto a write-protected checkpoint" "--save: cannot write checkpoint '$work/ro.st': is write-protected" \
    "$work/ro.st" --save "$work/ro.st"
echo "an old trace" >"$work/ro.json"
chmod a-w "$work/ro.json"
refused "--trace onto a write-protected file" "--trace: cannot write trace '$work/ro.json': is write-protected" \
    "$work/ro.json" --trace "$work/ro.json"
[ "$(ls -l "$work/ro.st" | cut -c1-10)" = "-r--r--r--" ] &&
    ok "the write-protected checkpoint keeps its mode" || not_ok "the write-protected checkpoint's mode changed"
refused "--save into a missing directory" "--save: cannot write checkpoint '$work/no/x.st': directory '$work/no' does not exist" \
    "$work/no/x.st" --save "$work/no/x.st"
# Open MPI's MPI_File_open aborts on an absolute name of about 245
# characters (the temporary's): a legal name of 230 is refused before that.
long=$(printf '%0230d' 0)
refused "--save with a name too long for MPI-IO" "--save: cannot write checkpoint .*MPI-IO (Open MPI) cannot open names that long" \
    "$work/$long" --save "$work/$long"
refused "--timeline with a name over NAME_MAX" "a part of the name is too long" \
    "$work/adir" --timeline "$work/$long$long"
if [ "$(id -u)" = 0 ]; then
    # Only a node made here, never one of the system's.
    mknod "$work/fakedev" c 1 3
    refused "--save onto a device node" "--save: cannot write checkpoint '$work/fakedev': is a device" \
        "$work/fakedev" --save "$work/fakedev"
    [ -c "$work/fakedev" ] && ok "the device node is still a device" || not_ok "the device node was replaced"
else
    echo "# skipped: --save onto a device node (needs root to make one)"
    chmod 555 "$work/adir"
    refused "--log in an unwritable directory" "directory '$work/adir' is not writable" \
        "$work/adir" --log "$work/adir/x.csv"
    chmod 755 "$work/adir"
fi

# Saving onto the checkpoint resumed from is allowed: it was read whole
# before the first step and is replaced by rename once the new one is done.
cp "$work/ck.st" "$work/again.st"
tt 2 --resume "$work/again.st" --steps 2 --save "$work/again.st" --sample-len 0 --quiet
s_again=$status
tt 1 --resume "$work/again.st" --steps 2 --sample-len 0 --quiet # the new X is a checkpoint
[ "$s_again$status" = 00 ] && [ -s "$work/again.st" ] && ! cmp -s "$work/ck.st" "$work/again.st" &&
    ok "--resume X --save X trains on and replaces X with a checkpoint that resumes" \
    || not_ok "--resume X --save X: exit $s_again; resuming the new X: exit $status"

# A run that trains no step has nothing to trace, draw or plot. --steps 0
# refuses --trace, --timeline and --plot with exit 2 before any work, and
# makes no file (it wrote a trace of no events, "trace of steps 0..-1", and a
# timeline titled "Step -1"). A resumed run whose checkpoint is at its end
# says so, writes none of them and exits 0: rerunning a finished job's
# command (--resume auto after a crash past the last save) must succeed.
none="--layers 1 --dim 16 --heads 2 --seq 16 --batch 2 --micro-batches 1 --sample-len 0 --quiet"
for np in 1 2; do
    expect_error "--steps 0 with --trace and --timeline ($np rank(s))" 2 \
        "^tiny_transformer: --trace and --timeline show the steps a run trains, and --steps 0 trains none: drop them or give --steps$" \
        "$np" $none --steps 0 --trace "$work/none.json" --timeline "$work/none.svg"
    [ ! -e "$work/none.json" ] && [ ! -e "$work/none.svg" ] && ok "--steps 0: no trace or timeline made" \
        || not_ok "--steps 0: a trace or timeline was made"
done
# ck.st is at step 1 of --steps 1: resuming it trains nothing.
for how in "--resume $work/done.st" "--resume auto --save $work/done.st" "--resume $work/done.st --steps 3 --stop-at 1"; do
    cp "$work/ck.st" "$work/done.st"
    tt 2 $how --trace "$work/none.json" --plot "$work/none.svg" --quiet --sample-len 0
    if [ "$status" -eq 0 ] && grep -q "^checkpoint '$work/done.st' is at step 1, where this run ends: no step to show, so --trace and --plot write nothing$" "$work/out" &&
        [ ! -e "$work/none.json" ] && [ ! -e "$work/none.svg" ]; then
        ok "$how, checkpoint at its end: exit 0, says so, no trace or plot"
    else
        not_ok "$how, checkpoint at its end: exit $status, $(grep -c 'no step to show' "$work/out") notes, trace or plot made: $(ls "$work"/none.* 2>/dev/null)"
    fi
done

# At the end: the trace path becomes a directory during the run. The
# checkpoint is written first and survives; the log's rows are all whole.
for np in 1 2; do
    rm -rf "$work/t.json" "$work/end.st" "$work/end.csv" "$work"/status.*
    tt_each "$np" $small --steps 4000 --eval-every 0 --save "$work/end.st" --log "$work/end.csv" \
        --trace "$work/t.json" &
    i=0
    while [ $i -lt 200 ] && [ "$(cat "$work/end.csv" 2>/dev/null | wc -l)" -lt 3 ]; do
        sleep 0.05; i=$((i + 1))
    done
    mkdir "$work/t.json"
    wait
    statuses=$(cat "$work"/status.* 2>/dev/null | sort -u | tr '\n' ' ')
    rows=$(awk -F, 'NF != 10 { bad++ } END { print NR - 1 - bad }' "$work/end.csv")
    if [ "$statuses" = "1 " ] && grep -q "cannot write trace '$work/t.json': it is now a directory" "$work/err" \
        && [ "$(grep -c . "$work/err")" -eq 1 ]; then
        ok "trace turned into a directory ($np rank(s)): refused at the rename"
    else
        not_ok "trace turned into a directory ($np rank(s)): statuses '$statuses'"
    fi
    tt 1 --resume "$work/end.st" --steps 4000 --sample-len 0 --quiet
    [ "$status" -eq 0 ] && ok "the checkpoint was written before the trace ($np rank(s))" \
        || not_ok "no usable checkpoint after the failed trace ($np rank(s))"
    [ "$rows" = 4000 ] && ok "the log has 4000 whole rows ($np rank(s))" || not_ok "log rows: $rows"
done

# The disk fills while the log is written: a file size limit of one block,
# 512 bytes or 1 KiB by the shell (ulimit -f 1; the program ignores SIGXFSZ
# itself, so a write past it fails with EFBIG as on a full disk; the wrapper
# once ignored it for the program, and a real ulimit killed the rank) against the 32 rows of 32
# steps, about 2 KiB. Every row is flushed, so the failure is seen by a flush
# long before the log's fclose, which alone was checked: the run ended with
# status 0 and a log cut at the limit. Later the failure was told only at the
# end; now it is told at the step it happens, the row's part that fitted is
# cut, and the run trains on to its end and exits 1.
# Shared memory is left out (--mca btl self,tcp): Open MPI's segment files
# would hit the limit first and warn.
# limited BLOCKS: a wrapper that runs the program under ulimit -f BLOCKS.
# The runs under it set TT_BIN and TT_MPIRUN and put them back after: an
# assignment before a shell function (TT_BIN=x expect_error ...) stays after
# the call in some shells (older bash as sh), and every later test would run
# under the limit.
limited() {
    printf '#!/bin/sh\nulimit -f %s\nexec "%s" "$@"\n' "$1" "$TT_BIN" >"$work/limited.sh"
    chmod +x "$work/limited.sh"
}
bin=$TT_BIN mpirun_=$TT_MPIRUN
# Under MPICH its own shared memory (UCX's, and MPICH's) cannot start under
# a file size limit, with or without TCP: MPI_Init aborts. Open MPI's TCP
# transport can.
if openmpi_only "the runs under a file size limit: MPICH's shared memory fails in MPI_Init there"; then
    no_shm="--mca btl self,tcp"
    limited 1
    for np in 1 2; do
        rm -f "$work/full.csv"
        TT_BIN="$work/limited.sh" TT_MPIRUN="$mpirun_ $no_shm"
        expect_error "log on a full disk ($np rank(s))" 1 \
            "^tiny_transformer: cannot write log '$work/full.csv' at step [0-9]*: File too large (the run trains on without it, and ends with status 1)$" \
            "$np" $small --pp "$np" --layers 2 --steps 32 --eval-every 0 --log "$work/full.csv"
        TT_BIN=$bin TT_MPIRUN=$mpirun_
        # said when it happened: the training went on to its last step (the
        # cores line counts steps 1..31 of 0..31), and
        # the log keeps the whole rows before the failed one, no part of it
        failed_at=$(sed -n "s/.*full.csv' at step \([0-9]*\):.*/\1/p" "$work/err")
        rows=$(tail -n 1 "$work/full.csv" | cut -d, -f1)
        if grep -q "^cores (wall clock), a training step .*(steps 1\.\.31)" "$work/out" && [ -n "$failed_at" ] && [ "$rows" = $((failed_at - 1)) ] &&
            [ "$(tail -c 1 "$work/full.csv" | od -An -c | tr -d ' ')" = '\n' ]; then
            ok "log on a full disk ($np rank(s)): told at step $failed_at, training went on, whole rows to step $rows"
        else
            not_ok "log on a full disk ($np rank(s)): failed at '$failed_at', last row '$rows'; stdout ends: $(tail -n 2 "$work/out")"
        fi
    done
    # A checkpoint with no room: OMPIO's writer printed a line of its own on
    # every rank whose write failed ("mca_fbtl_posix_pwritev: error in
    # (p)write(v):File too large"), before ours. The room is checked first now,
    # against the filesystem's free blocks and the file size limit, which is what
    # a test can set: 40 blocks (of 512 or 1024 bytes, by the shell) against the
    # weights and both Adam moments of $small's tok_emb and lm_head alone
    # (2 tensors x 3 arrays x 256 x 16 floats x 4 bytes = 98304 bytes). The
    # checkpoint it would replace stays as it was.
    limited 40
    cp "$work/ck.st" "$work/room.st"
    for np in 1 2; do
        TT_BIN="$work/limited.sh" TT_MPIRUN="$mpirun_ $no_shm"
        expect_error "checkpoint larger than the file size limit ($np rank(s))" 1 \
            "^tiny_transformer: cannot write checkpoint '$work/room.st': it needs [0-9]* bytes, the file size limit (ulimit -f) is [0-9]* bytes$" \
            "$np" $small --save "$work/room.st"
        TT_BIN=$bin TT_MPIRUN=$mpirun_
        cmp -s "$work/ck.st" "$work/room.st" && ! ls "$work"/room.st.tmp.* >/dev/null 2>&1 &&
            ok "the checkpoint is kept, no temporary left ($np rank(s))" ||
            not_ok "the checkpoint changed or a temporary was left ($np rank(s))"
    done
    # The limit on rank 1 alone (an MPMD launch; on a cluster, one host's
    # limits): every rank writes its part of the file, so every rank checks the
    # room. Rank 0 alone checked it, and rank 1 died of SIGXFSZ inside the
    # write (with the signal ignored: OMPIO's line, then ours).
    rm -f "$work"/status.*
    # shellcheck disable=SC2086
    $mpirun_ $no_shm --mca orte_abort_on_non_zero_status 0 \
        -np 1 sh -c 'st=$1; shift; "$0" "$@"; echo $? > "$st.0"' "$bin" "$work/status" $small --pp 2 --layers 2 --save "$work/room.st" : \
        -np 1 sh -c 'st=$1; shift; ulimit -f 40; "$0" "$@"; echo $? > "$st.1"' "$bin" "$work/status" $small --pp 2 --layers 2 --save "$work/room.st" \
        >"$work/out" 2>"$work/err"
    if [ "$(cat "$work/status.0" "$work/status.1" 2>/dev/null | tr '\n' ' ')" = "1 1 " ] && [ "$(grep -c . "$work/err")" -eq 1 ] &&
        grep -q "^tiny_transformer: cannot write checkpoint '$work/room.st': it needs [0-9]* bytes, the file size limit (ulimit -f) is [0-9]* bytes$" "$work/err" &&
        cmp -s "$work/ck.st" "$work/room.st"; then
        ok "the file size limit of rank 1 alone: $(cat "$work/err")"
    else
        not_ok "the file size limit of rank 1 alone: statuses $(cat "$work/status.0" "$work/status.1" 2>/dev/null | tr '\n' ' ')"
    fi
fi

# A run killed in the middle (SIGTERM, which skips stdio's buffers): the log
# was flushed after every row, so it ends with a whole one.
for np in 1 2; do
    rm -f "$work/killed.csv"
    $TT_MPIRUN -np "$np" "$TT_BIN" $small --steps 1000000 --eval-every 0 --log "$work/killed.csv" \
        >/dev/null 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 200 ] && [ "$(cat "$work/killed.csv" 2>/dev/null | wc -l)" -lt 100 ]; do
        sleep 0.05; i=$((i + 1))
    done
    kill -TERM "$pid"
    wait "$pid"
    rows=$(($(wc -l < "$work/killed.csv") - 1)) # less the header
    bad=$(awk -F, 'NF != 10' "$work/killed.csv" | wc -l)
    last=$(tail -c 1 "$work/killed.csv" | od -An -c | tr -d ' ')
    [ "$rows" -ge 99 ] && [ "$bad" -eq 0 ] && [ "$last" = '\n' ] &&
        ok "killed run ($np rank(s)) after $rows steps: the log ends with a whole row" \
        || not_ok "killed run ($np rank(s)): $rows rows (killed after 99 or more?), $bad partial rows, last byte '$last'"
done

# Stopped from outside (Ctrl-C reaches the ranks through mpirun as SIGTERM):
# rank 0 says, in one line, where the run was and which checkpoint is kept,
# and the run still dies of the signal. Its step must be the checkpoint's own.
# The SIGTERM goes to the ranks, as mpirun sends it on Ctrl-C: sent to
# mpirun itself, mpirun may be gone, on a loaded machine, before it has
# passed the ranks' last output on.
rm -f "$work/int.st"
$TT_MPIRUN -np 2 "$TT_BIN" $small --dp 2 --steps 1000000 --eval-every 0 --save "$work/int.st" \
    --save-every 3 >/dev/null 2>"$work/int.err" &
pid=$!
i=0
while [ $i -lt 400 ] && [ ! -s "$work/int.st" ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.3
for p in $(pgrep -f -- "$work/int.st"); do
    case $(cat "/proc/$p/comm" 2>/dev/null) in *tiny*) kill -TERM "$p" ;; esac
done
wait "$pid"
status=$?
said=$(grep -c "^tiny_transformer: stopped by SIGTERM" "$work/int.err")
# The step(s) the line says the file holds: one, or two while a save was under way.
pre="^tiny_transformer: stopped by SIGTERM (sent by mpirun on Ctrl-C or when another rank failed, and by kill) in step [0-9]* of 1000000; "
steps=$(sed -n -e "s|${pre}the last checkpoint holds step \([0-9]*\): --resume '.*int.st' continues from there\$|\1|p" \
               -e "s|${pre}'.*int.st' holds step \([0-9]*\) if the save under way finished, else step \([0-9]*\): --resume '.*int.st' continues from there\$|\1 \2|p" \
               "$work/int.err")
kept=$(tail -c +9 "$work/int.st" | head -c 2000 | tr -d '\000' | sed -n 's/.*"step":"\([0-9]*\)".*/\1/p')
if [ "$status" -ne 0 ] && [ "$said" -eq 1 ] && [ -n "$kept" ] &&
   printf ' %s \n' "$steps" | grep -q " $kept "; then
    ok "stopped by SIGTERM: one line names the checkpoint kept (step(s) $steps; the file holds $kept)"
else
    not_ok "stopped by SIGTERM (exit $status, $said lines, step(s) '$steps', checkpoint's '$kept'): $(head -n 3 "$work/int.err")"
fi
finish

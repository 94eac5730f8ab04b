#!/bin/sh
# tests/test_one_rank.sh - what only one rank meets is every rank's: each
# rank parses its own command line and opens its own checkpoint, so an MPMD
# launch (`mpirun -np 1 prog ARGS : -np 1 prog OTHER`) or hosts with disks of
# their own can give one rank a bad flag, no checkpoint or another one. Each
# case must end every rank with the same status and one message from rank 0;
# before the agreement, the rank that failed left for MPI_Finalize while the
# others waited for it in their next collective, for ever (the watchdog
# starts later). The two ranks see one relative path in two directories
# (mpirun -wdir), as two hosts would; so does --save, whose one file the
# ranks write together. Flags that parse but differ, or a TT_ setting of one
# rank's environment, are refused by name (the ranks compare their jobs).
. "$TT_SRCDIR/testlib.sh"
# The settings every rank must share start unset here (one case sets one).
unset TT_SLICE_MS TT_LEND_CORES TT_MPI_YIELDS TT_NO_DOORBELL

small="--layers 2 --dim 16 --heads 2 --seq 8 --batch 4 --micro-batches 2 --eval-every 0 --quiet --sample-len 0"
mkdir -p "$work/a" "$work/b"
tt 1 $small --steps 6 --save "$work/a/ck.st"
[ "$status" -eq 0 ] && ok "a checkpoint at step 6" || not_ok "the step-6 checkpoint (exit $status)"
tt 1 $small --steps 8 --save "$work/b/other.st"
[ "$status" -eq 0 ] && ok "another at step 8" || not_ok "the step-8 checkpoint (exit $status)"

# two WANT PATTERN DIR_A ARGS_A -- DIR_B ARGS_B: rank 0 runs in DIR_A with
# ARGS_A, rank 1 in DIR_B with ARGS_B; both must exit WANT and stderr be one
# message matching PATTERN (grep -E), from one rank. env_b: VAR=VALUE
# settings for rank 1's environment alone (none by default).
env_b=
two() {
    what=$1 want=$2 pattern=$3 dir_a=$4
    shift 4
    args_a=""
    while [ "$1" != -- ]; do args_a="$args_a $1"; shift; done
    shift
    dir_b=$1
    shift
    rm -f "$work"/status.*
    # shellcheck disable=SC2086
    timeout 120 $TT_MPIRUN $TT_MPI_KEEP_GOING \
        -np 1 -wdir "$dir_a" sh -c "$EACH_WRAP" "$TT_BIN" $args_a : \
        -np 1 -wdir "$dir_b" env $env_b sh -c "$EACH_WRAP" "$TT_BIN" "$@" >"$work/out" 2>"$work/err"
    status=$?
    statuses=$(rank_statuses)
    if [ "$status" -eq 124 ]; then
        not_ok "$what: still running after 120 s"
    elif [ "$statuses" != "2x$want" ]; then
        not_ok "$what: rank exit statuses $statuses, expected 2x$want"
    elif [ "$want" -ne 0 ] && { [ "$(grep -c . "$work/err")" -ne 1 ] || ! grep -Eq -- "$pattern" "$work/err"; }; then
        not_ok "$what: stderr is not one line matching '$pattern'"
    else
        ok "$what: $(head -n 1 "$work/err")"
    fi
}

run="$small --pp 2 --steps 10 --watchdog 60"
two "a bad flag on rank 1 only" 2 "^tiny_transformer: --steps expects an integer, got 'x'$" \
    "$work/a" $run -- "$work/b" $run --steps x
two "a bad flag on rank 0 only" 2 "^tiny_transformer: --steps expects an integer, got 'x'$" \
    "$work/a" $run --steps x -- "$work/b" $run
two "the checkpoint missing on rank 1 only" 1 "^tiny_transformer: cannot open checkpoint 'ck.st': No such file" \
    "$work/a" $run --resume ck.st -- "$work/b" $run --resume ck.st
# Both files are whole and fit the flags; only their identity differs.
cp "$work/b/other.st" "$work/b/ck.st"
two "another checkpoint on rank 1" 1 "^tiny_transformer: checkpoint 'ck.st' is not the same file on every rank" \
    "$work/a" $run --resume ck.st -- "$work/b" $run --resume ck.st
# The same bytes in both places are one checkpoint.
cp "$work/a/ck.st" "$work/b/ck.st"
two "the same checkpoint in both places" 0 "" \
    "$work/a" $run --resume ck.st -- "$work/b" $run --resume ck.st
grep -q "validation PASSED" "$work/out" && ok "... resumed, and the spot check passes" ||
    not_ok "the resumed run's spot check"
# --resume auto: rank 0 finds its --save file, rank 1 none, and would have
# started at step 0 while rank 0 continued at step 6.
cp "$work/a/ck.st" "$work/a/auto.st"
two "--resume auto finding the checkpoint on rank 0 only" 1 "^tiny_transformer: checkpoint 'auto.st' is not the same file on every rank" \
    "$work/a" $run --resume auto --save auto.st -- "$work/b" $run --resume auto --save auto.st
cmp -s "$work/a/ck.st" "$work/a/auto.st" && ok "... and the checkpoint is kept" ||
    not_ok "the --resume auto checkpoint changed"
two "--help on rank 1 only: every rank leaves with 0" 0 "" \
    "$work/a" $run -- "$work/b" $run --help
# Flags that parse on both ranks but differ, and a setting of the environment
# that differs: each rank would have run its own job, and they waited for
# each other until the watchdog (300 s by default) or aborted in MPI.
two "--steps 6 on rank 0, --steps 8 on rank 1" 2 \
    "^tiny_transformer: rank 1 was given '--steps 8' on its command line where rank 0 has '--steps 6': every rank of a job must be given the same flags$" \
    "$work/a" $run --steps 6 -- "$work/b" $run --steps 8
# With --resume auto: refused before the checkpoint is read ("continuing"
# was said first, then the difference refused).
cp "$work/a/ck.st" "$work/a/auto2.st"
cp "$work/a/ck.st" "$work/b/auto2.st"
two "--steps 6 and 8 with --resume auto" 2 \
    "^tiny_transformer: rank 1 was given '--steps 8' on its command line where rank 0 has '--steps 6': every rank of a job must be given the same flags$" \
    "$work/a" $run --resume auto --save auto2.st --steps 6 -- "$work/b" $run --resume auto --save auto2.st --steps 8
grep -q "continuing" "$work/out" && not_ok "... it said it was continuing" || ok "... with no word of continuing"
two "--validate on rank 0 only" 2 \
    "^tiny_transformer: rank 1 was given nothing more on its command line where rank 0 has '--validate': every rank of a job must be given the same flags$" \
    "$work/a" $run --validate -- "$work/b" $run
env_b=TT_MPI_YIELDS=1
two "TT_MPI_YIELDS=1 on rank 1 only" 2 \
    "^tiny_transformer: rank 1 has 'TT_MPI_YIELDS=1' in its environment where rank 0 has 'TT_MPI_YIELDS unset': every rank of a job must be given the same TT_MPI_YIELDS$" \
    "$work/a" $run -- "$work/b" $run
env_b=
# --save where the ranks see two filesystems: each would make a file of its
# own, and Open MPI's MPI_File_open waited for ever inside itself (at the end
# of the run); now refused before the first step, leaving no file behind.
two "--save onto a filesystem of each rank's own" 1 \
    "^tiny_transformer: cannot write checkpoint 'new.st': rank 1 does not see the temporary 'new.st.tmp.[0-9]*' that rank 0 made \(No such file or directory\); every rank writes its part of one checkpoint file, so the ranks need one filesystem$" \
    "$work/a" $run --save new.st -- "$work/b" $run --save new.st
ls "$work/a" "$work/b" | grep -q "^new\.st" && not_ok "... a file was left: $(ls "$work/a" "$work/b" | grep '^new')" ||
    ok "... and neither directory holds a file of it"
finish

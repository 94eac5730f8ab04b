# tests/testlib.sh - shared helpers for the shell integration tests.
# Sourced by each test; run-test provides TT_MPIRUN (mpirun with the flags this
# machine needs) and the Makefile provides TT_BIN (the program).
set -u
: "${TT_BIN:?TT_BIN must name the tiny_transformer program}"
# run-test has set the launcher up (tests/launcher.sh); a test run by hand
# sets it up here, from $MPIRUN or mpirun
[ -n "${TT_MPI_FLAVOUR:-}" ] || . "${TT_SRCDIR:-$(dirname "$0")}/launcher.sh"
# A rank's place in the job, as its launcher tells it (Open MPI's or Hydra's
# variable), for sh -c wrappers around the program: "$RANK_OF_JOB" there.
RANK_OF_JOB='${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}'

# openmpi_only WHAT: 0 under Open MPI; else says the case WHAT (with why it
# needs Open MPI) is skipped and returns 1.
openmpi_only() {
    [ "$TT_MPI_FLAVOUR" = openmpi ] && return 0
    echo "# skipped under $TT_MPI_FLAVOUR: $1"
    return 1
}
failures=0
checks=0
work=$(mktemp -d "${TMPDIR:-/tmp}/tt-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

# tt NP ARGS...: run the program on NP ranks; stdout to $work/out, stderr to
# $work/err, exit status in $status.
tt() {
    np=$1
    shift
    $TT_MPIRUN -np "$np" "$TT_BIN" "$@" >"$work/out" 2>"$work/err"
    status=$?
}

# rank_pid M R: the pid of world rank R among the descendants of mpirun M (a
# job started in the background: M is its $!; Open MPI's ranks are its
# children, Hydra's its proxy's).
rank_pid() {
    for p in $(pgrep -P "$1"); do
        if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null |
            grep -qx "OMPI_COMM_WORLD_RANK=$2\|PMI_RANK=$2"; then
            echo "$p"
            return
        fi
        q=$(rank_pid "$p" "$2")
        [ -n "$q" ] && { echo "$q"; return; }
    done
}

# wait_for CONDITION: waits (at most 30 s) until the shell condition holds;
# 1 if it never did.
wait_for() {
    i=0
    while ! eval "$1"; do
        i=$((i + 1))
        [ "$i" -gt 1500 ] && return 1
        sleep 0.02
    done
}

ok() { checks=$((checks + 1)); echo "ok - $1"; }
not_ok() {
    checks=$((checks + 1)); failures=$((failures + 1))
    echo "NOT OK - $1"
    echo "---- stdout"; tail -n 20 "$work/out" 2>/dev/null
    echo "---- stderr"; tail -n 20 "$work/err" 2>/dev/null
}

# tt_each NP ARGS...: like tt, but every rank also records its own exit
# status in $work/status.RANK, so a test can check that all ranks agree.
# (Open MPI's mpirun would otherwise kill the other ranks as soon as one
# exits non-zero; with that turned off, mpirun's own status is 0, so only the
# ranks' count.)
# EACH_WRAP is its sh -c wrapper: the program, then its status into the file.
# Hydra, told not to clean up, sends SIGUSR1 to the others when a rank exits
# non-zero; ignored (and so ignored by the program too), each rank ends on
# its own, as under Open MPI.
EACH_WRAP='trap "" USR1; "$0" "$@"; s=$?; echo $s > "'"$work"'/status.'"$RANK_OF_JOB"'"; exit $s'
tt_each() {
    np=$1
    shift
    rm -f "$work"/status.*
    $TT_MPIRUN $TT_MPI_KEEP_GOING -np "$np" sh -c "$EACH_WRAP" "$TT_BIN" "$@" >"$work/out" 2>"$work/err"
    status=$?
}

# rank_statuses: the exit statuses tt_each recorded, counted: "4x1", or
# "3x0,1x1" when the ranks disagree.
rank_statuses() { cat "$work"/status.* 2>/dev/null | sort | uniq -c | awk '{ printf "%s%dx%s", sep, $1, $2; sep = "," }'; }

# expect_error WHAT STATUS PATTERN NP ARGS...: every rank exits with STATUS,
# stderr holds exactly one message and it matches PATTERN (so one rank spoke,
# and nothing from MPI_Abort or a crash): one line starting "tiny_transformer:",
# possibly followed by lines of the same message (a layout error's table of
# the layouts that work), none of them from MPI, a signal or another rank.
expect_error() {
    what=$1 want=$2 pattern=$3 np=$4
    shift 4
    tt_each "$np" "$@"
    lines=$(grep -c . "$work/err")
    if [ "$(grep -c '^tiny_transformer' "$work/err")" -eq 1 ] &&
       [ "$(head -n 1 "$work/err" | grep -c '^tiny_transformer')" -eq 1 ] &&
       ! grep -q 'MPI\|Signal\|signal\|\*\*\*\|^mpirun\|^---\|^\[mpiexec@\|BAD TERMINATION' "$work/err"; then
        lines=1
    fi
    statuses=$(rank_statuses)
    if [ "$statuses" != "${np}x$want" ]; then
        not_ok "$what: rank exit statuses $statuses, expected ${np}x$want"
    elif ! grep -q -- "$pattern" "$work/err"; then
        not_ok "$what: stderr does not match '$pattern'"
    elif [ "$lines" -ne 1 ]; then
        not_ok "$what: $lines lines on stderr, expected one"
    else
        ok "$what: $(cat "$work/err")"
    fi
}

# worst_error: the largest relative error in the --validate table of $work/out.
worst_error() {
    awk '/^  (tok_emb|pos_emb|blocks|ln_f|lm_head)/ { for (i = 3; i <= NF; i++) if ($i + 0 > w) w = $i + 0 } END { printf "%.2e", w }' "$work/out"
}

# validate_case NP ARGS...: a run with --validate on NP ranks ($cfg first)
# exits 0, passes the oracle, has the traffic of its formulas, and every line
# listed in $must_say (one per line) is in its output.
validate_case() {
    np=$1
    shift
    what="$*"
    tt "$np" $cfg "$@" --validate
    if [ "$status" -ne 0 ]; then
        not_ok "$what: exit $status"
        return
    fi
    printf '%s\n%s\n%s\n' "validation PASSED" "every GPU's TP/PP/DP traffic equals its formula: yes" \
        "${must_say:-}" > "$work/want"
    while IFS= read -r want; do
        [ -z "$want" ] && continue
        grep -qF "$want" "$work/out" || { not_ok "$what: no '$want'"; return; }
    done < "$work/want"
    ok "$what: validation passed (worst relative error $(worst_error)), traffic = formula"
}

# finish: the test's exit status (failures make it fail).
finish() {
    echo "$checks checks, $failures failed"
    [ "$failures" -eq 0 ]
    exit $?
}

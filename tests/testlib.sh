# tests/testlib.sh - shared helpers for the shell integration tests.
# Sourced by each test; run-test provides TT_MPIRUN (mpirun with the flags this
# machine needs) and the Makefile provides TT_BIN (the program).
set -u
: "${TT_BIN:?TT_BIN must name the tiny_transformer program}"
: "${TT_MPIRUN:=mpirun --oversubscribe}"
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

ok() { checks=$((checks + 1)); echo "ok - $1"; }
not_ok() {
    checks=$((checks + 1)); failures=$((failures + 1))
    echo "NOT OK - $1"
    echo "---- stdout"; tail -n 20 "$work/out" 2>/dev/null
    echo "---- stderr"; tail -n 20 "$work/err" 2>/dev/null
}

# expect_error WHAT STATUS PATTERN NP ARGS...: the run exits with STATUS,
# prints exactly one line on stderr that matches PATTERN, and nothing from
# MPI_Abort or a crash.
expect_error() {
    what=$1 want=$2 pattern=$3 np=$4
    shift 4
    tt "$np" "$@"
    lines=$(grep -c . "$work/err")
    if [ "$status" -ne "$want" ]; then
        not_ok "$what: exit status $status, expected $want"
    elif ! grep -q -- "$pattern" "$work/err"; then
        not_ok "$what: stderr does not match '$pattern'"
    elif [ "$lines" -ne 1 ]; then
        not_ok "$what: $lines lines on stderr, expected one"
    else
        ok "$what: $(cat "$work/err")"
    fi
}

# finish: the test's exit status (failures make it fail).
finish() {
    echo "$checks checks, $failures failed"
    [ "$failures" -eq 0 ]
    exit $?
}

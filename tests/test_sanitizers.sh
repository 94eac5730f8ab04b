#!/bin/sh
# tests/test_sanitizers.sh - a second build with AddressSanitizer and
# UndefinedBehaviorSanitizer (issue 13: "Sanitizers in CI"; CI runs `make
# check`, so this runs there): the library, the program and the cheap unit
# tests compiled with -fsanitize=address,undefined -fno-sanitize-recover=undefined,
# then the unit tests and six runs of tiny_transformer (1 rank with a save;
# tp 2 x pp 2 resuming it under --validate; dp 2 with the reports;
# interleaved pp 2 x dp 2 with the trace, timeline, log and a save; zb-v on
# pp 2 x tp 2 under --validate; a damaged checkpoint refused on pp 2). Any
# sanitizer report fails.
#
# The build is not a second configure: an out-of-tree configure is refused
# when the source tree was configured in place (a git clone built the README
# way), and distcheck's source tree is read-only. Instead the sources listed
# in src/Makefile.am are compiled directly with the compiler and the package
# flags configure found (passed in by tests/Makefile.am), into this test's
# temporary directory; nothing is written to the source or build tree.
#
# Open MPI does not free everything at exit, so leak detection is off
# (detect_leaks=0): a leak report would be Open MPI's, not ours. The
# sanitizers exit with statuses of their own (97, 98) and their reports are
# searched for in the output as well, since a rank's report may come with
# status 1, our ordinary error status.
#
# The checker is tested with planted faults: two tiny programs with a heap
# overflow and a signed overflow, built with the same flags, must be caught.
#
# Exit status: 0 pass, 1 failure, 77 skipped (the compiler cannot link
# -fsanitize=address,undefined).
. "$TT_SRCDIR/testlib.sh"

: "${TT_SAN_CC:?TT_SAN_CC must name the C compiler (set by tests/Makefile.am)}"
top=$(cd "$TT_SRCDIR/.." && pwd)
san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
# -O1 builds in about half the time of -O2 and keeps the reports exact.
cflags="-g -O1 $san ${TT_SAN_CFLAGS:-}"
cppflags="-I$top/include -I$top/src -I$TT_SRCDIR -I${TT_SAN_CONFIG_DIR:-$top} ${TT_SAN_CPPFLAGS:-}"
libs="${TT_SAN_LIBS:-} -lm"
b="$work/build"
mkdir -p "$b"

# (Not detect_stack_use_after_return: its fake stack frames are less aligned
# than the AVX-512 copies of the kernels (core/simd.h) assume for their
# 64-byte local blocks, and they fault there.)
ASAN_OPTIONS="detect_leaks=0:exitcode=97:abort_on_error=0:strict_string_checks=1"
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98"
export ASAN_OPTIONS UBSAN_OPTIONS

# A sanitizer's report in $work/out or $work/err (or a sanitizer's status).
REPORT='AddressSanitizer\|UndefinedBehaviorSanitizer\|LeakSanitizer\|runtime error:'
reported() {
    [ "$status" -eq 97 ] || [ "$status" -eq 98 ] || grep -q "$REPORT" "$work/out" "$work/err"
}

# ---- can this compiler do it? ----------------------------------------------------
printf 'int main(void) { return 0; }\n' > "$b/probe.c"
if ! $TT_SAN_CC $cflags "$b/probe.c" -o "$b/probe" >"$b/probe.log" 2>&1 || ! "$b/probe"; then
    echo "$TT_SAN_CC cannot build with $san: skipping the sanitizer build"
    sed -n 1,5p "$b/probe.log"
    exit 77
fi

# ---- the checker, with planted faults -------------------------------------------
cat > "$b/heap.c" <<'EOF'
#include <stdlib.h>
int main(int argc, char **argv)
{
    char *p = malloc(8);
    p[8 + argc - 1] = 1; /* one byte past the block */
    int r = p[0];
    free(p);
    return r & 0 & (int)(argv != 0);
}
EOF
cat > "$b/ub.c" <<'EOF'
#include <limits.h>
int main(int argc, char **argv)
{
    int x = INT_MAX - 1 + argc; /* INT_MAX */
    x += argc;                  /* signed overflow */
    return (x == 0) & (argv != 0);
}
EOF
# Each fault by the sanitizer meant to catch it, with its own exit status:
# the heap overflow by AddressSanitizer (UBSan's object-size check, which
# would see the store first, is off for it), the overflow by UBSan.
# fault | extra flags | exit | report
while IFS='|' read -r fault extra want pattern <&3; do
    if ! $TT_SAN_CC $cflags $extra "$b/$fault.c" -o "$b/$fault" >"$work/err" 2>&1; then
        not_ok "planted fault $fault: does not build"
        continue
    fi
    "$b/$fault" >"$work/out" 2>"$work/err"
    status=$?
    if [ "$status" -eq "$want" ] && grep -q "$pattern" "$work/err"; then
        ok "planted fault $fault: caught (exit $status: $(grep -m 1 "$pattern" "$work/err" | cut -c 1-90))"
    else
        not_ok "planted fault $fault: exit $status (want $want), report: $(grep -m 1 "$REPORT" "$work/err" | cut -c 1-90)"
    fi
done 3<<'T'
heap|-fno-sanitize=object-size|97|AddressSanitizer: heap-buffer-overflow
ub||98|runtime error: signed integer overflow
T

# ---- the build ---------------------------------------------------------------------
# The library's sources, as src/Makefile.am lists them.
srcs=$(sed -n '/^libtinytransformer_la_SOURCES *=/,/[^\\]$/p' "$top/src/Makefile.am" |
       tr ' \t\\' '\n\n\n' | grep '\.c$')
if [ -z "$srcs" ]; then
    not_ok "no library sources found in $top/src/Makefile.am"
    finish
fi
start=$(date +%s)
cat > "$b/cc.sh" <<EOF
#!/bin/sh
# cc.sh SOURCE OBJECT: one compilation of the sanitizer build.
exec $TT_SAN_CC $cflags $cppflags -c "\$1" -o "\$2"
EOF
chmod +x "$b/cc.sh"
# Two at a time: the machine of record has two cores.
for s in $srcs; do
    echo "$top/src/$s $b/$(echo "$s" | tr / _ | sed 's/\.c$/.o/')"
done | xargs -n 2 -P 2 "$b/cc.sh" >"$work/err" 2>&1
built=$?
if [ "$built" -ne 0 ]; then
    not_ok "the sanitizer build of the library failed"
    finish
fi
ar rcs "$b/libtt.a" "$b"/*.o
units="test_kernels test_kernels_gemm test_kernels_ce test_model test_optim_data test_checkpoint
    test_checkpoint_bad test_flags test_flags_values test_traffic test_pipeline test_pipeline_reject
    test_pipeline_zb test_pipeline_narrate test_slots"
mpi_units="test_tensor_parallel_np2 test_checkpoint_mpi_np4"
link() { # link NAME SOURCE: one program against the library
    $TT_SAN_CC $cflags $cppflags "$2" "$b/libtt.a" $libs -o "$b/$1" >>"$work/err" 2>&1
}
link tiny_transformer "$top/src/app/main.c" || built=1
for u in $units $mpi_units; do
    # test_tensor_parallel_np2 is built from test_tensor_parallel.c
    src=$TT_SRCDIR/$u.c
    [ -f "$src" ] || src=$TT_SRCDIR/${u%_np*}.c
    link "$u" "$src" || built=1
done
if [ "$built" -ne 0 ]; then
    not_ok "the sanitizer build of the program or the unit tests failed"
    tail -n 20 "$work/err"
    finish
fi
ok "sanitizer build: $(echo "$srcs" | wc -l) library sources, the program and $(echo $units $mpi_units | wc -w) unit tests in $(( $(date +%s) - start )) s"

# ---- the unit tests ----------------------------------------------------------------
for u in $units; do
    (cd "$work" && "$b/$u") >"$work/out" 2>"$work/err"
    status=$?
    if reported; then
        not_ok "$u: sanitizer report"
    elif [ "$status" -ne 0 ]; then
        not_ok "$u: exit $status"
    else
        ok "$u: clean ($(grep -m 1 '^[0-9]*%: Checks' "$work/out" "$work/err" | sed 's/^[^:]*://'))"
    fi
done
for u in $mpi_units; do
    np=${u##*_np}
    (cd "$work" && $TT_MPIRUN -np "$np" "$b/$u") >"$work/out" 2>"$work/err"
    status=$?
    if reported; then
        not_ok "$u: sanitizer report"
    elif [ "$status" -ne 0 ]; then
        not_ok "$u: exit $status"
    else
        ok "$u: clean on $np ranks"
    fi
done

# ---- the program under MPI -------------------------------------------------------------
TT_BIN="$b/tiny_transformer"
cfg="--layers 4 --dim 32 --heads 4 --seq 16 --batch 8 --micro-batches 4 --eval-every 2 --sample-len 16"
# san_case WHAT NP ARGS...: the run ends with exit 0 and no sanitizer report.
san_case() {
    what=$1 np=$2
    shift 2
    tt "$np" $cfg "$@"
    if reported; then
        not_ok "$what: sanitizer report"
    elif [ "$status" -ne 0 ]; then
        not_ok "$what: exit $status"
    else
        ok "$what: clean"
    fi
}
san_case "1 rank, saving" 1 --steps 3 --save "$work/a.st"
san_case "tp 2 x pp 2, resumed, --validate" 4 --tp 2 --pp 2 --steps 5 --resume "$work/a.st" --validate
san_case "dp 2, --report comm,memory,shards" 2 --dp 2 --steps 3 --report comm,memory,shards
san_case "interleaved pp 2 x dp 2, --trace, --timeline, --log, --save" 4 --pp 2 --dp 2 \
    --schedule interleaved --virtual-stages 2 --steps 3 --trace "$work/t.json" \
    --timeline "$work/t.svg" --log "$work/t.csv" --save "$work/b.st"
san_case "zb-v pp 2 x tp 2 (the V's turn on one stage), --validate" 4 --pp 2 --tp 2 \
    --schedule zb-v --steps 3 --validate
# An error path too: a damaged checkpoint is refused on every rank (exit 1).
cp "$work/b.st" "$work/c.st"
printf 'X' | dd of="$work/c.st" bs=1 seek=$(( $(wc -c < "$work/c.st") - 3 )) conv=notrunc 2>/dev/null
tt 2 --pp 2 --resume "$work/c.st" --steps 5
if reported; then
    not_ok "a damaged checkpoint on pp 2: sanitizer report"
elif [ "$status" -ne 1 ] || [ ! -s "$work/b.st" ] || ! grep -q "checksum" "$work/err"; then
    not_ok "a damaged checkpoint on pp 2: exit $status (expected 1, naming its checksum), or no checkpoint to damage"
else
    ok "a damaged checkpoint on pp 2: refused, clean"
fi
echo "total $(( $(date +%s) - start )) s after the probe"
finish

#!/bin/sh
# tests/test_clang.sh - the library, the program and the examples compile with
# clang too, not only with the gcc configure picked: gcc takes some
# non-standard C silently (a static initializer made of other const objects,
# which trace_svg_layout.c once had, is an extension that clang refuses), and
# a user on a clang system would meet such an error first. Every source file
# is compiled with -fsyntax-only (about as fast as reading it), with the
# package's own flags, and any error fails.
#
# The check is tested with a planted fault: a file with that static
# initializer must fail to compile here.
#
# Exit status: 0 pass, 1 failure, 77 skipped (no clang on this machine).
. "$TT_SRCDIR/testlib.sh"

cc=""
for c in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
    if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
done
if [ -z "$cc" ]; then
    echo "no clang on this machine: skipping the clang compile"
    exit 77
fi
top=$(cd "$TT_SRCDIR/.." && pwd)
# The package's flags as configure found them for gcc (TT_SAN_*, from
# tests/Makefile.am); -Wno-unknown-warning-option for a gcc-only one.
flags="-fsyntax-only -Wno-unknown-warning-option ${TT_SAN_CFLAGS:-} -I$top/include -I$top/src -I${TT_SAN_CONFIG_DIR:-$top} ${TT_SAN_CPPFLAGS:-}"

# ---- the checker catches what gcc lets through ------------------------------------
cat > "$work/planted.c" <<'EOF'
typedef struct { unsigned char r, g, b; } rgb;
static const rgb RED = {255, 0, 0};
const rgb *first(void)
{
    static const rgb base[1] = {RED};
    return base;
}
EOF
if $cc $flags "$work/planted.c" >"$work/planted.log" 2>&1; then
    not_ok "planted: $cc accepted a static initializer made of a const object"
else
    ok "planted: $cc refuses a static initializer made of a const object ($(grep -m1 -o 'error: .*' "$work/planted.log"))"
fi

# ---- every source ---------------------------------------------------------------
n=0
bad=""
for f in $(cd "$top" && find src examples -name '*.c' | sort); do
    n=$((n + 1))
    if ! $cc $flags "$top/$f" >"$work/one.log" 2>&1; then
        bad="$bad $f"
        grep 'error:' "$work/one.log" | head -n 3 | sed 's/^/# /'
    fi
done
if [ -z "$bad" ]; then
    ok "$n source files of src/ and examples/ compile with $cc"
else
    not_ok "$cc cannot compile:$bad"
fi

finish

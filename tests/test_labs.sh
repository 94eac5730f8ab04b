#!/bin/sh
# tests/test_labs.sh - the lab handouts (doc/labs/lab*.md) and the man page
# cannot rot.
#
# 1. Every line of a ```sh block of a lab is run, in order, in one scratch
#    directory (so a lab's files, e.g. lab5/..., are there for its later
#    commands). A leading `mpirun` (with any of -q, --oversubscribe,
#    --allow-run-as-root after it) becomes $TT_MPIRUN, which already has the
#    flags this machine needs; `./tiny_transformer` becomes $TT_BIN. Each
#    command must exit 0, or N when the line ends with `# expect exit N`.
# 2. Every line of a ```output block must appear in the output (stdout and
#    stderr) of the command before the block: as a whole line, where `...`
#    stands for any text (timings, which vary from run to run). A ```text
#    block is shown, not checked (its digits vary with the machine's BLAS),
#    except that after the line `<!-- checked: first line -->` its first
#    line is, as an output line: a table's header, so a command that picks
#    columns by number cannot drift off them unseen.
# 3. The options of `tiny_transformer --help` are exactly those of the man
#    page doc/tiny_transformer.1, with the same defaults.
#
# TT_LABS_OUTDIR=DIR keeps every command's output in DIR/<lab>-<k>.txt.
. "$TT_SRCDIR/testlib.sh"

docdir=$TT_SRCDIR/../doc
run=$work/run
mkdir -p "$run"
start=$(date +%s)

# The commands and expected lines of all labs, one record a line:
# LAB<TAB>cmd|out<TAB>TEXT.
for lab in "$docdir"/labs/lab*.md; do
    awk -v lab="$(basename "$lab" .md)" '
        /^<!-- checked: first line -->[ \t]*$/ { head = 1; next }
        /^```sh[ \t]*$/ { kind = "cmd"; next }
        /^```output[ \t]*$/ { kind = "out"; next }
        /^```text[ \t]*$/ && head { kind = "head"; head = 0; next }
        /^```/ { kind = ""; next }
        kind == "cmd" && (/^[ \t]*$/ || /^[ \t]*#/) { next }
        kind == "head" { printf "%s\tout\t%s\n", lab, $0; kind = ""; next }
        kind != "" { printf "%s\t%s\t%s\n", lab, kind, $0 }
    ' "$lab"
done > "$work/records"

ncmd=$(grep -c "	cmd	" "$work/records")
[ "$ncmd" -gt 0 ] && ok "$ncmd commands in $(ls "$docdir"/labs/lab*.md | wc -l) labs" || not_ok "no lab commands found in $docdir/labs"

# matches OUTFILE PATTERN: some line of OUTFILE is PATTERN, "..." matching any text.
matches() {
    awk -v pat="$2" '
        function fits(line,   n, parts, i, p, pos, rest) {
            n = split(pat, parts, /\.\.\./)
            rest = line
            for (i = 1; i <= n; i++) {
                p = parts[i]
                if (i == 1) {
                    if (substr(rest, 1, length(p)) != p) return 0
                    rest = substr(rest, length(p) + 1)
                } else if (i == n) {
                    return p == "" || (length(rest) >= length(p) && substr(rest, length(rest) - length(p) + 1) == p)
                } else {
                    pos = index(rest, p)
                    if (pos == 0) return 0
                    rest = substr(rest, pos + length(p))
                }
            }
            return rest == ""
        }
        fits($0) { found = 1; exit }
        END { exit !found }
    ' "$1"
}

k=0
last=""
while IFS='	' read -r lab kind text; do
    if [ "$kind" = out ]; then
        if [ -z "$last" ]; then
            not_ok "$lab: an output block before any command"
        elif matches "$work/both" "$text"; then
            ok "$lab: output of '$last' has: $text"
        else
            not_ok "$lab: output of '$last' has no line: $text"
        fi
        continue
    fi
    k=$((k + 1))
    want=0
    cmd=$text
    case $cmd in
        *"# expect exit "[0-9]*)
            want=${cmd##*# expect exit }
            cmd=${cmd%%# expect exit *} ;;
    esac
    shown=$(printf '%s' "$cmd" | sed 's/[ \t]*$//')
    # mpirun and its Open MPI flags -> $TT_MPIRUN; ./tiny_transformer -> $TT_BIN.
    case $cmd in
        "mpirun "*)
            rest=${cmd#mpirun }
            while :; do
                case $rest in
                    "-q "*) rest=${rest#-q } ;;
                    "--oversubscribe "*) rest=${rest#--oversubscribe } ;;
                    "--allow-run-as-root "*) rest=${rest#--allow-run-as-root } ;;
                    *) break ;;
                esac
            done
            cmd="$TT_MPIRUN $rest" ;;
    esac
    cmd=$(printf '%s\n' "$cmd" | sed 's#^\./tiny_transformer\( \|$\)#"$TT_BIN"\1#; s# \./tiny_transformer\( \|$\)# "$TT_BIN"\1#')
    (cd "$run" && eval "$cmd") </dev/null >"$work/out" 2>"$work/err"
    status=$?
    cat "$work/out" "$work/err" > "$work/both"
    if [ -n "${TT_LABS_OUTDIR:-}" ]; then
        mkdir -p "$TT_LABS_OUTDIR"
        { printf '$ %s\n' "$shown"; cat "$work/both"; echo "[exit $status]"; } > "$TT_LABS_OUTDIR/$lab-$k.txt"
    fi
    last=$shown
    if [ "$status" -eq "$want" ]; then
        ok "$lab: exit $status: $shown"
    else
        not_ok "$lab: exit $status, expected $want: $shown"
    fi
done < "$work/records"
echo "lab commands took $(($(date +%s) - start)) s"

# The man page against --help: the same options, the same defaults.
man=$docdir/tiny_transformer.1
"$TT_BIN" --help > "$work/help" 2>&1
: > "$work/out"
: > "$work/err"
# The options an entry is about: in --help an entry's head (a line starting
# "  --", up to the gap before its text), in the man page the line after
# .TP; an option only named in another entry's text does not count.
awk '/^  --/ { sub(/   +.*/, ""); print }' "$work/help" | grep -o -- '--[a-z][a-z0-9-]*' |
    sort -u > "$work/help.opts"
sed 's/\\-/-/g' "$man" | awk 'prev ~ /^\.TP/ { print } { prev = $0 }' |
    grep -o -- '--[a-z][a-z0-9-]*' | sort -u > "$work/man.opts"
if [ -s "$work/help.opts" ] && cmp -s "$work/help.opts" "$work/man.opts"; then
    ok "man page and --help have entries for the same $(wc -l < "$work/help.opts") options"
else
    not_ok "options: < only in --help, > only in the man page: $(diff "$work/help.opts" "$work/man.opts" | grep '^[<>]' | tr '\n' ' ')"
fi
# Each entry's first option and its "(default ...)": in --help an entry starts
# with "  --" and goes on in lines indented further; in the man page an entry is
# a .TP paragraph (or .TQ lines) up to the next macro that ends it.
awk '
    function flush() { if (name != "") { if (match(text, /\(default [^)]*\)/)) print name, substr(text, RSTART, RLENGTH); } name = ""; text = "" }
    /^  --/ { flush(); split($1, f, ","); name = f[1]; text = $0; next }
    /^      / && name != "" { text = text " " $0; next }
    { flush() }
    END { flush() }
' "$work/help" | sed 's/  */ /g' | sort > "$work/help.defaults"
sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\(dq/"/g' -e 's/\\e/\\/g' -e 's/\\ / /g' -e 's/\\&//g' "$man" | awk '
    function flush() { if (name != "") { if (match(text, /\(default [^)]*\)/)) print name, substr(text, RSTART, RLENGTH); } name = ""; text = "" }
    /^\.TP/ { flush(); intp = 1; next }
    /^\.(SH|SS|PP|P|LP|IP|RE|RS)/ { flush(); intp = 0; next }
    intp && name == "" { line = $0; sub(/^\.[A-Z]+ +/, "", line); if (line ~ /^--/) { split(line, f, /[ ,"]/); name = f[1]; text = line; next } }
    intp && name != "" { text = text " " $0 }
    END { flush() }
' | sed 's/  */ /g' | sort > "$work/man.defaults"
if [ -s "$work/help.defaults" ] && cmp -s "$work/help.defaults" "$work/man.defaults"; then
    ok "man page and --help give the same $(wc -l < "$work/help.defaults") defaults"
else
    not_ok "defaults: < --help, > man page: $(diff "$work/help.defaults" "$work/man.defaults" | grep '^[<>]' | tr '\n' ' ')"
fi
finish

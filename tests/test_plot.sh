#!/bin/sh
# tests/test_plot.sh - --plot draws what the logs say: the SVG parses, each
# polyline's data-points are the (step, loss) and (step, eval_loss) rows of
# its CSV, its pixels are those points through the stated map, inside the
# plot area, the legend's lines fit the image, and several logs overlay as
# one curve each. Bad inputs get one line and exit 1.
. "$TT_SRCDIR/testlib.sh"

tiny="--layers 1 --dim 16 --heads 2 --seq 16 --batch 2 --micro-batches 1 --sample-len 0 --quiet"

# check_svg SVG CSV... : python3 reads the SVG with an XML parser and compares
# the k-th series' polylines with the k-th CSV.
check_svg() {
    python3 - "$@" <<'PY'
import csv, math, sys
import xml.etree.ElementTree as ET
svg, logs = sys.argv[1], sys.argv[2:]
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(svg).getroot()
area = root.find(".//s:rect[@class='area']", ns)
ax, ay = float(area.get("x")), float(area.get("y"))
aw, ah = float(area.get("width")), float(area.get("height"))
g = root.find(".//s:g[@class='curves']", ns)
a, b, c, d, e, f = map(float, g.get("data-transform")[len("matrix("):-1].split())
def pairs(text):
    return [tuple(map(float, p.split(","))) for p in text.split()]
def points(pl):
    return pairs(pl.get("data-points"))
def same(xs, ys):
    return len(xs) == len(ys) and all(x[0] == y[0] and math.isclose(x[1], y[1], rel_tol=1e-8) for x, y in zip(xs, ys))
problems = []
for k, log in enumerate(logs):
    rows = list(csv.DictReader(open(log)))
    want_loss = [(float(r["step"]), float(r["loss"])) for r in rows]
    want_eval = [(float(r["step"]), float(r["eval_loss"])) for r in rows if r["eval_loss"]]
    loss = g.findall("s:polyline[@class='loss'][@data-series='%d']" % k, ns)
    ev = g.findall("s:polyline[@class='eval'][@data-series='%d']" % k, ns)
    if len(loss) != 1 or not same(points(loss[0]), want_loss):
        problems.append("%s: loss polyline differs from the CSV" % log)
    if want_eval and (len(ev) != 1 or not same(points(ev[0]), want_eval)):
        problems.append("%s: eval polyline differs from the CSV" % log)
    if not want_eval and ev:
        problems.append("%s: an eval polyline, but the CSV has no eval loss" % log)
    # What is drawn: each pixel is its data point through the map (the
    # pixels are printed to 0.001).
    for pl in loss + ev:
        px, dat = pairs(pl.get("points")), points(pl)
        if len(px) != len(dat) or any(abs(p[0] - (a * x + c * y + e)) > 0.002 or abs(p[1] - (b * x + d * y + f)) > 0.002
                                      for p, (x, y) in zip(px, dat)):
            problems.append("%s: the %s curve's pixels are not its points through the map" % (log, pl.get("class")))
    for x, y in want_loss + want_eval:
        px, py = a * x + c * y + e, b * x + d * y + f
        if not (ax - 0.01 <= px <= ax + aw + 0.01 and ay - 0.01 <= py <= ay + ah + 0.01):
            problems.append("%s: point (%g, %g) falls outside the plot area" % (log, x, y))
            break
    if log not in "".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")):
        problems.append("%s: not named in the legend" % log)
# The legend's lines fit the image (7 px a character of its 11.5 px font
# is generous).
width = float(root.get("width"))
for t in root.findall(".//s:text[@class='legend']", ns):
    if float(t.get("x")) + 7 * len(t.text or "") > width:
        problems.append("legend '%s' runs past the image's %g px" % (t.text, width))
if root.find(".//*[@vector-effect]") is not None:
    problems.append("vector-effect, which SVG 1.1 lacks")
extra = [p for p in g.findall("s:polyline", ns) if not p.get("data-series", "").isdigit() or int(p.get("data-series")) >= len(logs)]
if extra:
    problems.append("%d polylines belong to no log" % len(extra))
print("; ".join(problems) if problems else "ok")
PY
}

# This run: the plot written at the end holds the losses the log holds.
tt 1 $tiny --steps 12 --eval-every 4 --log "$work/a.csv" --plot "$work/a.svg"
if [ "$status" -eq 0 ] && grep -q "wrote plot '$work/a.svg'" "$work/out"; then ok "--plot of this run"; else not_ok "--plot of this run (status $status)"; fi
# The legend names "this run", not the CSV: compare the points alone.
sed "s|this run (tp 1 pp 1 dp 1)|$work/a.csv|" "$work/a.svg" > "$work/a2.svg"
v=$(check_svg "$work/a2.svg" "$work/a.csv")
[ "$v" = ok ] && ok "this run's curves are the log's rows" || not_ok "this run's plot: $v"
# 3 eval points (steps 3, 7, 11), 12 loss points: counted independently of the CSV.
n=$(python3 -c "
import xml.etree.ElementTree as ET
r = ET.parse('$work/a.svg').getroot()
print(*[len(p.get('points').split()) for p in r.iter('{http://www.w3.org/2000/svg}polyline')])")
[ "$n" = "12 3" ] && ok "12 loss points and 3 eval points" || not_ok "points per polyline: $n"

# Two logs overlaid (another learning rate, on 2 GPUs), without training.
tt 2 $tiny --steps 8 --lr 0.01 --dp 2 --log "$work/b.csv"
tt 1 --plot "$work/ab.svg" "$work/a.csv" "$work/b.csv"
if [ "$status" -eq 0 ] && ! grep -q "^step\|trained" "$work/out"; then ok "--plot of two logs, no training"; else not_ok "--plot of two logs (status $status)"; fi
v=$(check_svg "$work/ab.svg" "$work/a.csv" "$work/b.csv")
[ "$v" = ok ] && ok "each log is its own curve" || not_ok "two logs: $v"

# A legend line longer than a small loss gives ("(last 123456.5000)", a
# long name) still fits the image.
printf 'step,loss,eval_loss\n0,123456.5,\n1,123455.5,123455.25\n' > "$work/a-log-with-a-long-name-and-a-large-loss.csv"
tt 1 --plot "$work/big.svg" "$work/a-log-with-a-long-name-and-a-large-loss.csv"
v=$(check_svg "$work/big.svg" "$work/a-log-with-a-long-name-and-a-large-loss.csv")
[ "$status" -eq 0 ] && [ "$v" = ok ] && ok "a long legend line fits the image" || not_ok "a long legend line: exit $status, $v"

# A planted fault: a plot whose points are moved must fail the check.
sed 's/points="0,/points="0,9/' "$work/ab.svg" > "$work/bad.svg"
v=$(check_svg "$work/bad.svg" "$work/a.csv" "$work/b.csv")
[ "$v" != ok ] && ok "the check sees a moved point" || not_ok "the check passed a moved point"
# ... and so must a pixel drawn away from its point.
sed 's/ points="\([0-9]*\)\./ points="1\1./' "$work/ab.svg" > "$work/bad2.svg"
v=$(check_svg "$work/bad2.svg" "$work/a.csv" "$work/b.csv")
[ "$v" != ok ] && ok "the check sees a moved pixel: $v" || not_ok "the check passed a moved pixel"

# Bad inputs.
expect_error "a missing CSV" 1 "--plot: cannot read '$work/none.csv'" 1 --plot "$work/x.svg" "$work/a.csv" "$work/none.csv"
printf 'step,loss,eval_loss\n0,5.5,\n1,five,\n' > "$work/bad.csv"
expect_error "a CSV with a bad row" 1 "'$work/bad.csv' line 3: expected a step and a loss" 1 --plot "$work/x.svg" "$work/bad.csv"
printf 'a,b\n1,2\n' > "$work/other.csv"
expect_error "a CSV that is no log" 1 "is not a --log CSV" 1 --plot "$work/x.svg" "$work/other.csv"
cp "$work/a.csv" "$work/keep.csv"
expect_error "plotting onto a log" 1 "cannot write plot '$work/a.csv': it is the same file as the --log CSV" 1 --plot "$work/a.csv" "$work/a.csv"
[ ! -e "$work/x.svg" ] && ok "no plot left by a failed --plot" || not_ok "a failed --plot left a file"
cmp -s "$work/a.csv" "$work/keep.csv" && ok "the log is untouched" || not_ok "the log was damaged"
# Numbers a log could hold but no scale can draw. Steps near 1e18, or losses
# near 1e17 that differ by one unit of their rounding: a tick step below that
# unit once never advanced, and the plot grew without end (9 GB in two
# minutes). Each run is timed out and its file size capped, so a regression
# fails here instead of filling the disk.
printf 'step,loss,eval_loss\n1000000000000000000,1,\n1000000000000000100,2,\n' > "$work/far.csv"
printf 'step,loss,eval_loss\n1,100000000000000000,\n2,100000000000000016,\n' > "$work/flat.csv"
for csv in far flat; do
    rm -f "$work/$csv.svg"
    (ulimit -f 262144; timeout 60 $TT_MPIRUN -np 1 "$TT_BIN" --plot "$work/$csv.svg" "$work/$csv.csv" >"$work/out" 2>"$work/err")
    status=$?
    if [ "$status" -eq 0 ] && python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$work/$csv.svg" 2>/dev/null &&
        ! grep -qi 'inf\|nan' "$work/$csv.svg"; then
        ok "$csv.csv: drawn, and the SVG parses with finite numbers"
    else
        not_ok "$csv.csv: status $status (124: it did not end), or the SVG is not whole"
    fi
done
ls "$work" | grep -q '\.svg\.tmp\.' && not_ok "a plot's temporary was left" && rm -f "$work"/*.svg.tmp.*
# Losses whose spread overflows a double: refused, nothing written.
printf 'step,loss,eval_loss\n1,1e308,\n2,-1e308,\n' > "$work/wide.csv"
expect_error "losses spread past the double range" 1 "--plot: cannot draw steps .* losses -1e+308 to 1e+308" 1 \
    --plot "$work/wide.svg" "$work/wide.csv"
[ ! -e "$work/wide.svg" ] && ok "no plot of the losses it cannot draw" || not_ok "a plot of undrawable losses was written"
# A row longer than the reader's line: named by its own line number (it was
# read in pieces, and the error named line 3 of a two-line file).
python3 -c "print('step,loss'); print('1,' + '9' * 5000)" > "$work/long.csv"
expect_error "a row longer than a line" 1 "'$work/long.csv' line 2 is longer than" 1 --plot "$work/x.svg" "$work/long.csv"
# The overlay trains nothing: a training run's file given with it was ignored
# (status 0, no checkpoint); it is refused, and nothing is written.
expect_error "--plot of logs with --save, 2 ranks" 2 "--plot with --log CSVs trains nothing, so --save would be ignored" 2 \
    --plot "$work/x.svg" "$work/a.csv" --save "$work/never.st"
[ ! -e "$work/never.st" ] && [ ! -e "$work/x.svg" ] && ok "nothing written by the refused overlay" || not_ok "the refused overlay wrote a file"
# A checkpoint to resume is no use to the overlay either (it was ignored).
expect_error "--plot of logs with --resume" 2 "--plot with --log CSVs trains nothing, so --resume would be ignored" 1 \
    --plot "$work/x.svg" "$work/a.csv" --resume "$work/never.st"
expect_error "an operand without --plot" 2 "unexpected argument 'a.csv'" 1 $tiny a.csv
finish

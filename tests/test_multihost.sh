#!/bin/sh
# tests/test_multihost.sh - 12 ranks on 3 "hosts" give the same checkpoint,
# bit for bit, as 12 ranks on one host.
#
# The hosts are Linux network namespaces on this machine: each has its own
# network stack with one address of the test's own subnet on a veth pair whose
# other end is on a bridge; nothing gets an address outside them. Open MPI
# reaches them as it reaches real hosts: a hostfile names the three addresses
# (4 slots each) and an rsh agent script stands in for ssh by entering the
# namespace of the address it is given, with a session directory of that
# host's own (the namespaces share /tmp). mpirun itself runs in a fourth
# namespace on the bridge (no slots), so the host's own interfaces, addresses
# and routes are never touched.
#
# Only TCP may carry the job: pml ob1 with btl tcp,self on the test subnet
# (and the runtime's own traffic, oob, likewise), so neither shared memory
# (vader) nor UCX can; the BTL log of the run proves it (and the same log of
# the one-host run proves the check sees shared memory when it is there).
#
# Why the results can be bit-identical at all: each float sum is computed in
# an order fixed by the collective algorithm, and the placement of the ranks
# must not change that algorithm. Open MPI's tuned component picks algorithms
# by communicator and message size; other components (han, hcoll) look at
# the nodes. Both runs therefore pin the algorithms of every collective the
# program uses (PINS below; doc/multihost.md). The layout (tp 2, pp 2, dp 3)
# keeps TP inside a host, as on real clusters, and puts DP (3 replicas, so
# the order of a sum matters) and PP across hosts. A third one-host run with
# another all-reduce algorithm must give a different checkpoint: the
# comparison can fail, and it fails for exactly the reason the pins exist.
#
# Exit status: 0 pass, 1 failure, 77 skipped (not root, no `ip`, namespaces
# cannot be made, or not Open MPI).
. "$TT_SRCDIR/testlib.sh"

# --watchdog 60: a run that stops moving for a minute (on a crowded machine
# the kernel can keep runnable tasks off the cores that long:
# doc/multihost.md) ends with each rank's report of the collective it waits
# in, where the runs' 90 s limit alone would kill it without a word. The
# watchdog changes no computed value.
cfg="--tp 2 --pp 2 --dp 3 --steps 3 --sample-len 0 --eval-every 0 --no-spot-check --watchdog 60"
# Ring all-reduce (the algorithm of doc/communication.md's formulas), basic
# linear reduce-scatter, ring all-gather, binomial broadcast. Gatherv has one
# (linear) algorithm. Only the reductions can change bits; the others are
# pinned so that nothing in a run depends on where its ranks are. The DP
# gradients go through the non-blocking all-reduce (libnbc's, in both overlap
# modes: doc/communication.md), pinned to its ring too.
PINS="--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4
 --mca coll_tuned_reduce_scatter_block_algorithm 1 --mca coll_tuned_allgather_algorithm 4
 --mca coll_tuned_bcast_algorithm 6 --mca coll_libnbc_iallreduce_algorithm 1"
OTHER_ALLREDUCE="--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 1
 --mca coll_tuned_reduce_scatter_block_algorithm 1 --mca coll_tuned_allgather_algorithm 4
 --mca coll_tuned_bcast_algorithm 6 --mca coll_libnbc_iallreduce_algorithm 2"

skip() { echo "skipped: $1"; exit 77; }
[ "$(id -u)" = 0 ] || skip "making network namespaces needs root"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (Debian package iproute2)"
[ "${TT_MPI_FLAVOUR:-openmpi}" = openmpi ] ||
    skip "the hostfile, rsh agent and --mca flags of this test are Open MPI's"

# Names carry this shell's pid, so two runs of the test cannot collide and a
# run killed with SIGKILL (no cleanup) leaves names that a later run can tell
# are orphaned: namespaces ttmhPID-*, bridge ttmhPIDb, veth ends ttmhPIDvN.
p=ttmh$$
bridge=${p}b
launcher=$p-L
made_ns=""
made_links=""
runpid=""

# remove_ns NS: end every process in it, then delete it.
remove_ns() {
    pids=$(ip netns pids "$1" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$1" 2>/dev/null
}

cleanup() {
    trap - EXIT INT TERM HUP
    [ -n "$runpid" ] && kill -TERM "$runpid" 2>/dev/null
    for ns in $made_ns; do remove_ns "$ns"; done
    for link in $made_links; do ip link del "$link" 2>/dev/null; done
    [ -n "$runpid" ] && { sleep 1; kill -KILL "$runpid" 2>/dev/null; }
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# Orphans of an earlier run that was killed outright (its pid is gone).
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(ttmh[0-9][0-9]*-[A-Za-z0-9]*\).*/\1/p'); do
    old=${ns%%-*}
    kill -0 "${old#ttmh}" 2>/dev/null && continue
    remove_ns "$ns"
    for link in $(ip -o link show 2>/dev/null | sed -n "s/^[0-9]*: \(${old}[bv][0-9]*\)[@:].*/\1/p"); do
        ip link del "$link" 2>/dev/null
    done
done

ip netns add "$launcher" 2>"$work/err" ||
    skip "cannot make a network namespace here: $(cat "$work/err")"
made_ns=$launcher

# A /24 of 10.213.0.0/16 that this host does not use: the addresses live only
# inside the namespaces and so cannot disturb the host's routing, but an
# address the host also has would make any log of the run ambiguous.
net=""
used=$({ ip -4 -o addr show; ip -4 route show table all; } 2>/dev/null)
for x in 7 8 9 10 11 12 13 14 15 16; do
    case $used in *"10.213.$x."*) continue ;; esac
    net=10.213.$x
    break
done
[ -n "$net" ] || skip "10.213.7-16.0/24 are all in use on this host"
subnet=$net.0/24

# A machine that lets us make a namespace but not a bridge or a veth pair
# (a container without those kernel modules) cannot run this test: that is
# the machine's limit, not a failure of the program, so it is a skip that
# says which step the kernel refused.
setup_failed() { skip "the kernel refused a step of the set-up: $1"; }
ip link add "$bridge" type bridge 2>"$work/err" || setup_failed "bridge: $(cat "$work/err")"
made_links=$bridge
ip link set "$bridge" up || setup_failed "bridge up"
i=0
hostfile=$work/hostfile
: > "$hostfile"
for ns in "$launcher" "$p-h1" "$p-h2" "$p-h3"; do
    if [ "$ns" != "$launcher" ]; then
        ip netns add "$ns" 2>"$work/err" || setup_failed "namespace $ns: $(cat "$work/err")"
        made_ns="$made_ns $ns"
    fi
    # The root-side end is named here; inside, every namespace calls its end tt0.
    ip link add "${p}v$i" type veth peer name tt0 netns "$ns" 2>"$work/err" ||
        setup_failed "veth ${p}v$i: $(cat "$work/err")"
    made_links="$made_links ${p}v$i"
    ip link set "${p}v$i" master "$bridge" up &&
        ip -n "$ns" addr add "$net.$((i + 1))/24" dev tt0 &&
        ip -n "$ns" link set tt0 up &&
        ip -n "$ns" link set lo up || setup_failed "addressing $ns"
    [ "$ns" != "$launcher" ] && echo "$net.$((i + 1)) slots=4" >> "$hostfile"
    i=$((i + 1))
done
ok "3 hosts: namespaces $p-h1..3 at $net.2-4 on bridge $bridge, mpirun in $launcher at $net.1"

# The rsh agent: Open MPI calls it as `agent HOST COMMAND...` (as it would
# call ssh) to start its daemon, orted, on HOST.
#
# Each host also gets a /tmp of its own for Open MPI's session directory
# (orte_tmpdir_base, which the daemon's ranks inherit). The namespaces share
# the machine's /tmp and its hostname, so the three daemons of a job would
# otherwise share one directory, /tmp/ompi.HOSTNAME.UID/jf.JOBFAMILY, and at
# start-up each daemon deletes that directory as stale before making its
# own: a daemon whose directory another has just removed fails its check of
# it and exits, silently (it has left its ssh), and mpirun waits for it until
# the timeout (doc/multihost.md). Real hosts have a /tmp each; so do these.
agent=$work/agent
cat > "$agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
    $net.2) ns=$p-h1 ;;
    $net.3) ns=$p-h2 ;;
    $net.4) ns=$p-h3 ;;
    *) echo "agent: no namespace for host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" env OMPI_MCA_orte_tmpdir_base="$work/tmp-\$ns" sh -c "\$*"
EOF
chmod +x "$agent"
mkdir "$work/tmp-$p-h1" "$work/tmp-$p-h2" "$work/tmp-$p-h3"

# run_bg LIMIT OUT ERR COMMAND...: COMMAND under `timeout`, waited for in the
# background so that a TERM to this shell runs the cleanup at once.
run_bg() {
    limit=$1 out=$2 err=$3
    shift 3
    timeout --kill-after=5 "$limit" "$@" >"$out" 2>"$err" &
    runpid=$!
    wait "$runpid"
    status=$?
    runpid=""
}
TCP="--hostfile $hostfile --mca plm_rsh_agent $agent --mca plm_rsh_no_tree_spawn 1
 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include $subnet --mca oob_tcp_if_include $subnet"
# three LIMIT OUT ERR ARGS...: mpirun, in the launcher's namespace, of 12
# ranks on the 3 hosts.
three() {
    limit=$1 out=$2 err=$3
    shift 3
    run_bg "$limit" "$out" "$err" ip netns exec "$launcher" $TT_MPIRUN -np 12 $TCP "$@"
}

# Placement: ranks 4k..4k+3 in namespace h(k+1), as the hostfile says, and
# the three namespaces are three network stacks, none of them this host's.
# Each rank also names the session directory its daemon gave it.
printf '#!/bin/sh\necho "$OMPI_COMM_WORLD_RANK $(readlink /proc/self/ns/net) ${OMPI_MCA_orte_top_session_dir:-none}"\n' > "$work/where"
chmod +x "$work/where"
three 30 "$work/out" "$work/err" "$work/where"
want=""
for r in 0 1 2 3 4 5 6 7 8 9 10 11; do
    want="$want$r $(ip netns exec "$p-h$((r / 4 + 1))" readlink /proc/self/ns/net)
"
done
got=$(sort -n "$work/out" | awk '{ print $1, $2 }')
stacks=$(printf %s "$want" | awk '{ print $2 }' | sort -u | grep -v -x "$(readlink /proc/self/ns/net)" | wc -l)
if [ "$status" -eq 0 ] && [ "$got" = "$(printf %s "$want")" ] && [ "$stacks" -eq 3 ]; then
    ok "ranks 0-3, 4-7, 8-11 run in namespaces h1, h2, h3 (3 network stacks)"
else
    # Nothing further can work: stop here instead of failing every check.
    not_ok "placement (exit $status): got $(echo $got)"
    finish
fi
# The agent's per-host /tmp reached every daemon and its ranks: a rank of
# host hK has its session directory under tmp-...-hK, nowhere shared.
apart=$(awk -v w="$work/tmp-$p-h" '{ if (index($3, w (int($1 / 4) + 1) "/") == 1) n++ } END { print n + 0 }' "$work/out")
if [ "$apart" -eq 12 ]; then
    ok "each host's ranks have their session directory in that host's own /tmp"
else
    not_ok "session directories: $apart of 12 ranks in their host's own /tmp: $(awk '{ print $3 }' "$work/out" | sort -u | tr '\n' ' ')"
fi

# btls FILE: the BTLs the ranks' send paths used (btl_base_verbose's "Using X
# btl for send to ... on node N" lines), one name per line.
btls() { sed -n 's/.*bml: Using \([a-z0-9]*\) btl for send to .*/\1/p' "$1" | words; }
# tcp_nodes FILE: the nodes that TCP sends went to.
tcp_nodes() { sed -n 's/.*bml: Using tcp btl for send to .* on node \([0-9.]*\).*/\1/p' "$1" | words; }
# words: the distinct lines of stdin, sorted, on one line.
words() { sort -u | tr '\n' ' ' | sed 's/ $//'; }
VERB="--mca btl_base_verbose 20 --mca pml_base_verbose 10"

t0=$(date +%s)
run_bg 90 "$work/out1" "$work/err1" $TT_MPIRUN -np 12 $PINS $VERB "$TT_BIN" $cfg --save "$work/one.st"
status1=$status
t1=$(date +%s)
three 90 "$work/out3" "$work/err3" $PINS $VERB "$TT_BIN" $cfg --save "$work/three.st"
t2=$(date +%s)
[ "$status" -eq 0 ] && [ -s "$work/three.st" ] && ok "3 hosts: trained and saved in $((t2 - t1)) s" ||
    { cp "$work/out3" "$work/out"; cp "$work/err3" "$work/err"; not_ok "3 hosts: exit $status"; }
[ "$status1" -eq 0 ] && [ -s "$work/one.st" ] && ok "1 host: trained and saved in $((t1 - t0)) s" ||
    { cp "$work/out1" "$work/out"; cp "$work/err1" "$work/err"; not_ok "1 host: exit $status1"; }

# Only TCP: the BTL components initialised and the ones that carried sends
# (self carries only a rank's messages to itself).
used3=$(btls "$work/err3")
init3=$(sed -n 's/.*select: init of component \([a-z0-9]*\) returned success.*/\1/p' "$work/err3" | words)
pml3=$(sed -n 's/.*select: component \([a-z0-9]*\) selected.*/\1/p' "$work/err3" | sort | uniq -c | awk '{ printf "%s%s %sx", sep, $2, $1; sep = ", " }')
if [ "$used3" = "self tcp" ] && [ "$init3" = "self tcp" ] && [ "$pml3" = "ob1 12x" ]; then
    ok "3 hosts: pml $pml3 (every rank); BTLs initialised: $init3; sends carried by: $used3"
else
    not_ok "3 hosts: pml '$pml3', BTLs initialised '$init3', used '$used3' (want ob1 12x; self tcp; self tcp)"
fi
n3=$(tcp_nodes "$work/err3")
if [ "$n3" = "$net.2 $net.3 $net.4" ]; then
    ok "3 hosts: TCP sends to all three hosts ($n3)"
else
    not_ok "3 hosts: sends went to nodes '$n3'"
fi
# The same check on the one-host run must see shared memory: it can fail.
used1=$(btls "$work/err1")
case " $used1 " in
    *" vader "* | *" sm "*) ok "the BTL check sees shared memory on 1 host (sends carried by: $used1)" ;;
    *) not_ok "1 host: no shared-memory BTL seen ('$used1'): the check could not catch one" ;;
esac

if cmp -s "$work/one.st" "$work/three.st"; then
    ok "checkpoints bit-identical: sha256 $(sha256sum < "$work/three.st" | cut -c1-16)... on 1 host and on 3"
else
    not_ok "checkpoints of 1 host and 3 hosts differ: $(cmp "$work/one.st" "$work/three.st" 2>&1)"
fi

# The planted fault: other all-reduce algorithms (blocking: basic linear,
# sums to rank 0 in rank order; non-blocking: binomial tree) change the order
# of the sums, the DP gradients' included, so the bits.
run_bg 90 "$work/out" "$work/err" $TT_MPIRUN -np 12 $OTHER_ALLREDUCE "$TT_BIN" $cfg --save "$work/other.st"
if [ "$status" -ne 0 ]; then
    not_ok "1 host, linear all-reduce: exit $status"
elif [ ! -s "$work/one.st" ] || [ ! -s "$work/other.st" ]; then
    not_ok "a checkpoint to compare is missing: the comparison proves nothing"
elif cmp -s "$work/one.st" "$work/other.st"; then
    not_ok "a different all-reduce algorithm gave the same checkpoint: the comparison cannot fail"
else
    ok "different all-reduce algorithms (linear, binomial) give a different checkpoint: the pins matter"
fi
finish

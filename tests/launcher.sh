# tests/launcher.sh - sourced by run-test, bench_dp.sh and min_gpu_mem.sh:
# the MPI launcher ($MPIRUN, else mpirun) with the flags this machine needs,
# by whose launcher it is. Sets:
#   TT_MPI_FLAVOUR      openmpi or mpich (a launcher that is neither stops here, 99)
#   TT_MPIRUN           the launcher and its flags. Open MPI's: -q (no banners,
#                       so a test sees only the program's own messages),
#                       --oversubscribe (more ranks than cores, as on a 2-core
#                       laptop), --allow-run-as-root as root (containers, CI).
#                       MPICH's Hydra needs none of them, and knows none.
#   TT_MPI_KEEP_GOING   the flag that lets the other ranks finish when one
#                       exits non-zero
#   TT_MPI_NO_BIND      the flag that leaves the ranks unbound (Hydra's default)
mpirun_bin=${MPIRUN:-mpirun}
case $("$mpirun_bin" --version 2>&1) in
    *"Open MPI"* | *OpenRTE*)
        TT_MPI_FLAVOUR=openmpi
        TT_MPIRUN="$mpirun_bin -q --oversubscribe"
        [ "$(id -u)" = 0 ] && TT_MPIRUN="$TT_MPIRUN --allow-run-as-root"
        TT_MPI_KEEP_GOING="--mca orte_abort_on_non_zero_status 0"
        TT_MPI_NO_BIND="--bind-to none" ;;
    *HYDRA*)
        TT_MPI_FLAVOUR=mpich
        TT_MPIRUN=$mpirun_bin
        TT_MPI_KEEP_GOING="-disable-auto-cleanup"
        TT_MPI_NO_BIND="" ;;
    *)
        echo "tests/launcher.sh: '$mpirun_bin --version' names neither Open MPI nor MPICH's Hydra" >&2
        exit 99 ;;
esac
export TT_MPI_FLAVOUR TT_MPIRUN TT_MPI_KEEP_GOING TT_MPI_NO_BIND

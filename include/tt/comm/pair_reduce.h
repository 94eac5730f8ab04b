/* tt/comm/pair_reduce.h - the all-reduce of a group of two as one exchange.
 *
 * Two members need no algorithm: each sends its buffer to the other and
 * combines the two. Float addition is commutative, so a + b and b + a are
 * the same bits, and the result equals any MPI algorithm's for two members,
 * bit for bit (a group of three or more has an order of summation: a few
 * numbers are gathered and folded in rank order with tt_reduce_fold, larger
 * buffers go through MPI). Done as a non-blocking send and receive with the doorbells
 * (tt/comm/doorbell.h), the waiting member sleeps instead of spinning in
 * MPI's progress loop: the collectives of TP 2 and DP 2 groups are most of
 * what a 12-GPU run on two cores waits for. */
#ifndef TT_COMM_PAIR_REDUCE_H
#define TT_COMM_PAIR_REDUCE_H

#include <mpi.h>
#include <stddef.h>

typedef struct {
    void *buf, *peer_data; /* this member's buffer (the result), the other's copy */
    int count;
    MPI_Datatype type;
    MPI_Op op;
    int me;                /* this member's rank in the pair, 0 or 1 */
    int peer_world;        /* the other member, a world rank */
    MPI_Request req[2];    /* the send, the receive */
} tt_pair_req;

/* Starts the exchange when comm has two members and (type, op) is one this
 * file combines (float, double or int with sum, max or min; float-int with
 * maxloc); returns -1 otherwise, having done nothing. Both members take the
 * same branch. tag tells apart exchanges in flight together. buf is sent as
 * it lies, so it must not change until tt_pair_finish. */
int tt_pair_start(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op, int tag,
                  tt_pair_req *p);
/* Waits for the other's half and for its own to be taken, and leaves the
 * combination in buf. */
void tt_pair_finish(tt_pair_req *p);
/* The same sum through memory both members map, when both are on this
 * host with the bells on (src/comm/pair_host.c): no MPI call, no kernel
 * copy, the same bits. *clock (if not NULL) becomes the larger of the two
 * members' (the latest entry time). Returns -1, having done nothing, where
 * tt_pair_start would, when the members are on two hosts, or for a sum over
 * 16 MiB; both members take the same branch. (The model uses the _to form
 * below; this in-place one is the tests'.) */
int tt_pair_host_allreduce(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op,
                           double *clock);
/* The same, out of place: recv gets the sum of the members' send. send may
 * be this member's slot for the next exchange (tt_pair_host_slot), made
 * there in place of a copy; recv must not be. */
int tt_pair_host_allreduce_to(MPI_Comm comm, const void *send, void *recv, int count,
                              MPI_Datatype type, MPI_Op op, double *clock);
/* The exchange alone: this member's `bytes` of send (in its slot, or
 * copied there) for the other's, which it returns (read-only, valid until
 * this member's next exchange on comm), with this member's index in *me;
 * NULL where the pair cannot use its slots. */
const void *tt_pair_host_exchange(MPI_Comm comm, const void *send, size_t bytes, double *clock,
                                  int *me);
/* Collective over the pair: where this member may make the `bytes` of its
 * next exchange on comm (its shared slot), or NULL where that exchange would
 * not go through the slots. Valid until that exchange: nothing else may go
 * over comm in between. */
void *tt_pair_host_slot(MPI_Comm comm, size_t bytes);
/* The all-gather (count elements each, in rank order into recv) and the
 * reduce-scatter (MPI_SUM; send holds 2 count elements, recv gets this
 * member's block summed, member 0's first) of two members through the same
 * slots, under the same conditions. */
int tt_pair_host_allgather(MPI_Comm comm, const void *send, void *recv, int count,
                           MPI_Datatype type, double *clock);
int tt_pair_host_reduce_scatter(MPI_Comm comm, const void *send, void *recv, int count,
                                MPI_Datatype type, double *clock);
/* Drops the key the pairs' mappings hang on (before MPI_Finalize, after the
 * communicators are freed). */
void tt_pair_host_free(void);
/* The other member's world rank (comm has two members). */
int tt_pair_peer_world(MPI_Comm comm);
/* Returns the pooled scratch buffers (before MPI_Finalize; harmless at any
 * time between exchanges). */
void tt_pair_flush(void);

/* The element size of a (type, op) that tt_reduce_fold combines (float,
 * double or int with sum, max or min; float-int with maxloc), else 0. */
size_t tt_reduce_elem(MPI_Datatype type, MPI_Op op);
/* out[i] = x0[i] op x1[i] for i < count (out may be x0 or x1). */
void tt_reduce_fold(void *out, const void *x0, const void *x1, int count, MPI_Datatype type,
                    MPI_Op op);

#endif

/* pair_reduce.c - the all-reduce of two members as one exchange
 * (tt/comm/pair_reduce.h says why the bits equal MPI's). */
#include "tt/comm/pair_reduce.h"
#include "tt/comm/doorbell.h"
#include "tt/core/common.h"
#include "core/vec.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float v;
    int i;
} float_int;

/* Scratch buffers come back here and are reused: the same sizes repeat
 * every micro-batch, and a fresh allocation of this size is a fresh mapping
 * whose pages fault in (and are zeroed) each time. A list per power of two,
 * last in first out: taking and giving back cost the same however many are
 * out (thousands with small --dp-bucket, all started before the first is
 * waited for), and a clock's 8 bytes never take a bucket's megabyte. */
typedef struct spare {
    int cls;            /* its list: the buffer holds 2^(cls + 6) bytes */
    struct spare *next; /* the buffer follows the header */
} spare;
enum { CLASSES = 48 };
static spare *spares[CLASSES]; /* [c]: buffers of 2^(c + 6) bytes */

static int size_class(size_t bytes)
{
    int c = 0;
    while (c < CLASSES - 1 && ((size_t)64 << c) < bytes)
        c++;
    return c;
}

static void *scratch(size_t bytes)
{
    const int c = size_class(bytes);
    spare *s = spares[c];
    if (s) {
        spares[c] = s->next;
        return s + 1;
    }
    s = tt_malloc(sizeof *s + ((size_t)64 << c));
    s->cls = c;
    return s + 1;
}

static void give_back(void *buf)
{
    spare *s = (spare *)buf - 1;
    s->next = spares[s->cls];
    spares[s->cls] = s;
}

void tt_pair_flush(void)
{
    /* Nothing stays in flight: tt_pair_finish completes both halves. The
     * spare buffers go back to the system. */
    for (int c = 0; c < CLASSES; c++)
        while (spares[c]) {
            spare *sp = spares[c];
            spares[c] = sp->next;
            free(sp);
        }
}

size_t tt_reduce_elem(MPI_Datatype type, MPI_Op op)
{
    if (type == MPI_FLOAT_INT)
        return op == MPI_MAXLOC ? sizeof(float_int) : 0;
    if (op != MPI_SUM && op != MPI_MAX && op != MPI_MIN)
        return 0;
    return type == MPI_FLOAT ? sizeof(float) : type == MPI_DOUBLE ? sizeof(double)
           : type == MPI_INT ? sizeof(int)
                             : 0;
}

/* The other member's world rank (the one its doorbell answers to), worked
 * out once per communicator and kept as an attribute of it: an exchange
 * runs several times per micro-batch, the group translation need not. */
static int peer_keyval = MPI_KEYVAL_INVALID;

static int drop_peer(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    free(val);
    return MPI_SUCCESS;
}

int tt_pair_peer_world(MPI_Comm comm)
{
    int me;
    MPI_Comm_rank(comm, &me);
    int other = 1 - me;
    if (peer_keyval == MPI_KEYVAL_INVALID)
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, drop_peer, &peer_keyval, NULL);
    int *w, flag = 0;
    MPI_Comm_get_attr(comm, peer_keyval, &w, &flag);
    if (!flag) {
        w = tt_malloc(sizeof *w);
        MPI_Group grp, world;
        MPI_Comm_group(comm, &grp);
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_translate_ranks(grp, 1, &other, world, w);
        MPI_Group_free(&grp);
        MPI_Group_free(&world);
        MPI_Comm_set_attr(comm, peer_keyval, w);
    }
    return *w;
}

int tt_pair_start(MPI_Comm comm, void *buf, int count, MPI_Datatype type, MPI_Op op, int tag,
                  tt_pair_req *p)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    const size_t elem = tt_reduce_elem(type, op);
    if (n != 2 || elem == 0)
        return -1;
    MPI_Comm_rank(comm, &me);
    const int other = 1 - me;
    p->peer_world = tt_pair_peer_world(comm);
    p->me = me;
    p->buf = buf;
    p->count = count;
    p->type = type;
    p->op = op;
    const size_t bytes = elem * (size_t)(count > 0 ? count : 1);
    p->peer_data = scratch(bytes);
    /* Sent from buf itself: it stays untouched until tt_pair_finish (the
     * callers' contract, MPI's too), which folds into it only once both
     * halves are done. */
    MPI_Irecv(p->peer_data, count, type, other, tag, comm, &p->req[1]);
    MPI_Isend(buf, count, type, other, tag, comm, &p->req[0]);
    tt_bell_ring(p->peer_world); /* our half is posted */
    return 0;
}

/* The sum of floats, the one fold that moves megabytes (TP activations,
 * DP gradients), in vector blocks with each clone's width (core/vec.h).
 * out may be x0 or x1 (vec_sum reads each block before writing it). One
 * code path whatever the aliasing, so both members of a pair run the same
 * instructions on the same operands: the same bits, even for two NaNs
 * (whose sum keeps one operand's payload, depending on the instruction's
 * operand order). */
TT_SIMD static void sum_floats(float *out, const float *x0, const float *x1, int count)
{
    vec_sum(out, x0, x1, count);
}

#define FOLD(T)                                                                    \
    do {                                                                           \
        T *o = out;                                                                \
        const T *a = x0, *b = x1;                                                  \
        if (op == MPI_SUM)                                                         \
            for (int i = 0; i < count; i++)                                        \
                o[i] = a[i] + b[i];                                                \
        else if (op == MPI_MAX)                                                    \
            for (int i = 0; i < count; i++)                                        \
                o[i] = b[i] > a[i] ? b[i] : a[i];                                  \
        else                                                                       \
            for (int i = 0; i < count; i++)                                        \
                o[i] = b[i] < a[i] ? b[i] : a[i];                                  \
    } while (0)

void tt_reduce_fold(void *out, const void *x0, const void *x1, int count, MPI_Datatype type,
                    MPI_Op op)
{
    if (type == MPI_FLOAT && op == MPI_SUM)
        sum_floats(out, x0, x1, count);
    else if (type == MPI_FLOAT)
        FOLD(float);
    else if (type == MPI_DOUBLE)
        FOLD(double);
    else if (type == MPI_INT)
        FOLD(int);
    else { /* MPI_FLOAT_INT, MPI_MAXLOC: ties go to the lower index, as MPI's */
        float_int *o = out;
        const float_int *a = x0, *b = x1;
        for (int i = 0; i < count; i++)
            o[i] = b[i].v > a[i].v || (b[i].v == a[i].v && b[i].i < a[i].i) ? b[i] : a[i];
    }
}

void tt_pair_finish(tt_pair_req *p)
{
    /* The other's half; then ring it (its send completes only when we took
     * it), and finish our own send before leaving: the other member is in
     * this same exchange now and rings us when it took our half. Leaving a
     * send half-done would make it depend on this rank's progress later,
     * when it may be parked in a barrier that waits for that other member
     * (a hang when the transport needs the sender's help, without
     * single-copy). */
    tt_bell_wait(&p->req[1], p->peer_world);
    tt_bell_ring(p->peer_world);
    tt_bell_wait(&p->req[0], p->peer_world);
    /* member 0's values first on both members: even a NaN gives both the
     * same answer */
    const void *x0 = p->me == 0 ? p->buf : p->peer_data;
    const void *x1 = p->me == 0 ? p->peer_data : p->buf;
    tt_reduce_fold(p->buf, x0, x1, p->count, p->type, p->op);
    give_back(p->peer_data);
    p->peer_data = NULL;
}

/* attention.c - causal self-attention, forward and backward: the matrix
 * products per head go to core/small_gemm (sized for them, not for the
 * linear layers' large products that cblas_sgemm does), the causal softmax and its
 * backward are written with the vector helpers of vec.h (see kernels.c for
 * the habits that make them fast and bit-exact across ISA clones). */
#include "tt/core/kernels.h"
#include "tt/core/kcost.h"
#include "tt/core/vclock.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/small_gemm.h"
#include "core/vec.h"

/* ------------------------------------------------------------------------ */
/* Causal self-attention                                                     */

/* Query rows are processed in blocks of ATT_BT: block [i0, i1) only attends to
 * keys [0, i1), so the products skip most of the masked upper triangle while
 * each call stays large enough to pay for its overhead (the BLAS's, where
 * small_gemm falls back to cblas_sgemm). */
#define ATT_BT 32

/* The attention softmaxes work on whole VL-blocks of a row, covering the
 * causal part [0, i], rather than on the exact i+1 entries: rows are short
 * (T = 64 means 1 to 4 blocks), and a scalar remainder or a variable-length
 * copy per row would cost more than the vector work itself. Blocks wholly
 * before the diagonal are read as they are; only the block holding it is
 * masked, with bit masks. Entries past the diagonal may hold anything (stale
 * memory, even NaN bits), which the masks keep out of every result. */

/* Block j0 of a row, as a pointer the loops below work on in place: the row
 * itself where the block lies inside it, else (only when T is not a multiple
 * of VL) a copy of the row's last T - j0 entries in tmp, padded with zeros,
 * that put_block writes back. The loops read and write through it directly
 * rather than through local copies of each block (core/vec.h, TT_IVDEP,
 * says why). */
TT_INLINE float *get_block(float *row, int j0, int T, float tmp[VL])
{
    if (j0 + VL <= T)
        return row + j0;
    memset(tmp, 0, VL * sizeof *tmp);
    memcpy(tmp, row + j0, (size_t)(T - j0) * sizeof *tmp);
    return tmp;
}

TT_INLINE void put_block(float *row, const float *blk, int j0, int T)
{
    if (j0 + VL > T)
        memcpy(row + j0, blk, (size_t)(T - j0) * sizeof *blk);
}

/* v where column col is causally visible (col < n), else the bits of
 * other: a select on the bits, which gcc vectorizes (a ?: on floats it
 * does not; see exp_approx). */
TT_INLINE float visible_or(float v, int col, int n, float other)
{
    const uint32_t m = -(uint32_t)(col < n);
    uint32_t bv, bo;
    memcpy(&bv, &v, sizeof bv);
    memcpy(&bo, &other, sizeof bo);
    bv = (bv & m) | (bo & ~m);
    memcpy(&v, &bv, sizeof v);
    return v;
}

/* Rows i0..i1 (at most ATT_BT of them) of a head's [T,T] scores, in place:
 * softmax over columns [0, i], zeros after (the causal mask). The work goes
 * in passes over all the rows (maxima, then exponentials and sums, then the
 * scaling) because one short row is a chain of dependent steps; rows of a
 * pass are independent and the CPU overlaps them. */
TT_SIMD
static void causal_softmax_rows(float *P /* T,T */, int i0, int i1, int T)
{
    float rowmax[ATT_BT], rowinv[ATT_BT];
    float tmp[VL];

    for (int i = i0; i < i1; i++) {
        float *s = P + (size_t)i * T;
        const int n = i + 1;
        const float s0 = s[0];
        float mx[VL];
        for (int l = 0; l < VL; l++)
            mx[l] = s0;
        int j0 = 0;
        for (; j0 + VL <= n; j0 += VL) { /* whole blocks: every column visible */
            const float *blk = s + j0;
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                mx[l] = blk[l] > mx[l] ? blk[l] : mx[l];
        }
        if (j0 < n) {
            const float *blk = get_block(s, j0, T, tmp);
            TT_IVDEP
            for (int l = 0; l < VL; l++) {
                const float x = visible_or(blk[l], j0 + l, n, s0);
                mx[l] = x > mx[l] ? x : mx[l];
            }
        }
        rowmax[i - i0] = lanes_max(mx);
    }

    for (int i = i0; i < i1; i++) {
        float *s = P + (size_t)i * T;
        const int n = i + 1;
        const float mx = rowmax[i - i0];
        /* A row sum of at most T numbers in [0, 1] needs no double. */
        float acc[VL] = {0};
        int j0 = 0;
        for (; j0 + VL <= n; j0 += VL) {
            float *blk = s + j0;
            TT_IVDEP
            for (int l = 0; l < VL; l++) {
                const float e = exp_nan(blk[l] - mx);
                acc[l] += e;
                blk[l] = e;
            }
        }
        if (j0 < n) {
            float *blk = get_block(s, j0, T, tmp);
            TT_IVDEP
            for (int l = 0; l < VL; l++) {
                float e = exp_nan(visible_or(blk[l], j0 + l, n, mx) - mx);
                e = visible_or(e, j0 + l, n, 0.0f);
                acc[l] += e;
                blk[l] = e;
            }
            put_block(s, blk, j0, T);
        }
        /* sum >= 1 (the max contributes e^0), so the reciprocal is safe. */
        rowinv[i - i0] = 1.0f / lanes_total(acc);
    }

    for (int i = i0; i < i1; i++) {
        float *s = P + (size_t)i * T;
        const int n = i + 1;
        const float inv = rowinv[i - i0];
        int j0 = 0;
        for (; j0 < n; j0 += VL) {
            float *blk = get_block(s, j0, T, tmp);
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                blk[l] *= inv;
            put_block(s, blk, j0, T);
        }
        if (j0 < T)
            memset(s + j0, 0, (size_t)(T - j0) * sizeof *s);
    }
}

/* Softmax backward on rows i0..i1, in place on dP (rows of ld T):
 * dS = P (dP - rowsum(P dP)) times the scale of the scores, with zeros past
 * the diagonal up to column i1, because the GEMMs that follow read the block
 * [i0:i1, 0:i1]. */
TT_SIMD
static void causal_softmax_backward_rows(float *dP /* T,T */, const float *P /* T,T */,
                                         float scale, int i0, int i1, int T)
{
    float ptmp[VL], dtmp[VL];
    for (int i = i0; i < i1; i++) {
        /* P is only read: get_block's copy is never written back to it */
        float *p = (float *)P + (size_t)i * T;
        float *d = dP + (size_t)i * T;
        const int n = i + 1;

        float acc[VL] = {0};
        int j0 = 0;
        for (; j0 + VL <= n; j0 += VL) { /* whole blocks: every column visible */
            const float *pb = p + j0, *db = d + j0;
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                acc[l] += pb[l] * db[l];
        }
        if (j0 < n) {
            const float *pb = get_block(p, j0, T, ptmp), *db = get_block(d, j0, T, dtmp);
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                acc[l] += visible_or(pb[l] * db[l], j0 + l, n, 0.0f);
        }
        const float dot = lanes_total(acc);

        for (j0 = 0; j0 + VL <= n; j0 += VL) {
            const float *pb = p + j0;
            float *db = d + j0;
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                db[l] = pb[l] * (db[l] - dot) * scale;
        }
        for (; j0 < i1; j0 += VL) {
            const float *pb = get_block(p, j0, T, ptmp);
            float *db = get_block(d, j0, T, dtmp);
            TT_IVDEP
            for (int l = 0; l < VL; l++)
                db[l] = visible_or(pb[l] * (db[l] - dot) * scale, j0 + l, n, 0.0f);
            put_block(d, db, j0, T);
        }
    }
}

void attention_forward(float *out /* B,T,NH*hs */, float *att /* B,NH,T,T */,
                       const float *q /* B,T,NH*hs */, const float *k /* B,T,NH*hs */,
                       const float *v /* B,T,NH*hs */, int B, int T, int NH, int hs)
{
    /* A head is a column slice of the [T, NH*hs] rows, read in place with
     * leading dimension ld; only K is copied, transposed once per head into
     * small_gemm's buffer (the kernel wants B's rows contiguous). */
    const int ld = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * ld + (size_t)h * hs;
            const float *Q = q + off, *K = k + off, *V = v + off; /* T,hs (ld) */
            float *O = out + off;                                 /* T,hs (ld) */
            float *P = att + ((size_t)b * NH + h) * T * T;        /* T,T */
            const float *Kt = tt_small_gemm_pack(K, 1, ld, hs, T); /* hs,T */
            for (int i0 = 0; i0 < T; i0 += ATT_BT) {
                const int i1 = i0 + ATT_BT < T ? i0 + ATT_BT : T;
                /* P[i0:i1, 0:i1] = scale Q[i0:i1] K[0:i1]^T */
                tt_small_gemm(P + (size_t)i0 * T, T, Q + (size_t)i0 * ld, ld, 1, Kt, T, 1,
                              i1 - i0, i1, hs, scale, 0);
                causal_softmax_rows(P, i0, i1, T);
                /* O[i0:i1] = P[i0:i1, 0:i1] V[0:i1] */
                tt_small_gemm(O + (size_t)i0 * ld, ld, P + (size_t)i0 * T, T, 1, V, ld, 1,
                              i1 - i0, hs, i1, 1.0f, 0);
            }
        }
    /* Charged as the model-FLOPs formula counts attention: both products over
     * the whole T x T square (what a GPU kernel without causal skipping does). */
    const tt_kcost kc = tt_kcost_attention_fwd(B, T, NH, ld);
    tt_vclock_compute(kc.flops, 4.0 * kc.floats);
}

void attention_backward(float *dq /* B,T,NH*hs */, float *dk /* B,T,NH*hs */,
                        float *dv /* B,T,NH*hs */, float *scratch /* T,T */,
                        const float *dout /* B,T,NH*hs */, const float *q,
                        const float *k, const float *v, const float *att /* B,NH,T,T */,
                        int B, int T, int NH, int hs)
{
    const int ld = NH * hs;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const size_t off = (size_t)b * T * ld + (size_t)h * hs;
            const float *Q = q + off, *K = k + off, *V = v + off, *dO = dout + off;
            float *dQ = dq + off, *dK = dk + off, *dV = dv + off; /* T,hs (ld) */
            const float *P = att + ((size_t)b * NH + h) * T * T;  /* T,T */
            float *dS = scratch;                                  /* T,T */
            const float *Vt = tt_small_gemm_pack(V, 1, ld, hs, T); /* hs,T */
            for (int i0 = 0; i0 < T; i0 += ATT_BT) {
                const int i1 = i0 + ATT_BT < T ? i0 + ATT_BT : T;
                const int m = i1 - i0;
                const float *Pb = P + (size_t)i0 * T;
                float *dSb = dS + (size_t)i0 * T;
                /* dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T (into dS, then in place) */
                tt_small_gemm(dSb, T, dO + (size_t)i0 * ld, ld, 1, Vt, T, 1, m, i1, hs, 1.0f, 0);
                causal_softmax_backward_rows(dS, P, scale, i0, i1, T);
                /* dQ[i0:i1] += dS[i0:i1, 0:i1] K[0:i1] */
                tt_small_gemm(dQ + (size_t)i0 * ld, ld, dSb, T, 1, K, ld, 1, m, hs, i1, 1.0f, 1);
                /* dK[0:i1] += dS[i0:i1, 0:i1]^T Q[i0:i1] */
                tt_small_gemm(dK, ld, dSb, 1, T, Q + (size_t)i0 * ld, ld, 1, i1, hs, m, 1.0f, 1);
                /* dV[0:i1] += P[i0:i1, 0:i1]^T dO[i0:i1] (P is zero above the
                 * diagonal, as stored by the forward) */
                tt_small_gemm(dV, ld, Pb, 1, T, dO + (size_t)i0 * ld, ld, 1, i1, hs, m, 1.0f, 1);
            }
        }
    const tt_kcost kc = tt_kcost_attention_bwd(B, T, NH, ld);
    tt_vclock_compute(kc.flops, 4.0 * kc.floats);
}


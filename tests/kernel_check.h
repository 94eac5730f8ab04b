/* tests/kernel_check.h - what the kernel test programs (test_kernels*.c)
 * share: the small sizes, a fixed random stream, the error measure, the
 * finite-difference check of a gradient and the check that a backward
 * accumulates (+=).
 *
 * Every float forward is compared with a double-precision reference written
 * in the test program, independently of the kernels. Every gradient of a float
 * backward kernel is compared with central finite differences of a scalar
 * objective L = sum(out * R) (R a fixed random array, so dL/dout = R) taken
 * on the double reference: (L(x+h) - L(x-h)) / 2h with h = 1e-6. In double
 * that quotient is accurate to ~1e-9 (rounding ~1e-16 |L| / h, truncation
 * ~h^2), far below float32 errors, so what is measured is the error of the
 * float kernel.
 *
 * Error measure: max over elements of |a - n| / max(|n|, 1e-3 max|n|), i.e.
 * relative error, except that an element much smaller than the largest one
 * of its array is judged on its absolute error (a near-zero element is the
 * sum of larger terms that cancel, and carries their rounding error).
 * Tolerance 1e-3, forwards and gradients alike: float32 rounds at
 * u = 6e-8, and a result here is a sum of K <= ~40 products, whose error is
 * bounded by ~K u sum|terms|, i.e. up to ~1e-6 of the array's scale, which
 * the 1e-3 floor reads as up to ~1e-3 (typical errors, printed by each test,
 * are 1e-7..1e-4). A wrong term, sign, scale or constant gives 1e-2 or more;
 * the data are chosen so that it does (e.g. a LayerNorm row of small variance
 * makes eps matter at the 4% level). */
#ifndef TT_KERNEL_CHECK_H
#define TT_KERNEL_CHECK_H

#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H 1e-6
#define ERR_FLOOR 1e-3
#define TOL_BWD 1e-3
#define TOL_FWD 1e-3
/* Accumulation checks compare g(twice) with 2 g(once): equal up to the
 * rounding of one extra addition per element. */
#define TOL_ACC 1e-6

/* Small sizes: B=2, T=5, C=8, NH=2 heads of hs=4, N=B*T, OC=6, Vp=10, V=7. */
enum { B = 2, T = 5, NH = 2, HS = 4, C = NH * HS, N = B * T, OC = 6, VP = 10, VV = 7 };
/* The widest rows of the tests' second sizes: wider than the kernels' vector
 * block of 16 floats, with a remainder. */
enum { MAXC = 40 };

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static uint64_t rng_state;

static inline void rng_seed(uint64_t s) { rng_state = s; }

/* splitmix64: a fixed, platform-independent stream. */
static inline double rng_uniform(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
}

/* Random floats in [lo, hi), with an exact double copy (d may be NULL). */
static inline void fill(float *f, double *d, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        f[i] = (float)(lo + (hi - lo) * rng_uniform());
        if (d)
            d[i] = f[i];
    }
}

static inline void fill_const(float *f, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        f[i] = v;
}

/* max_i |a_i - ref_i| / max(|ref_i|, ERR_FLOOR * max_j |ref_j|) */
static inline double max_rel_err(const float *a, const double *ref, size_t n)
{
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
    const double floor_ = scale > 0.0 ? ERR_FLOOR * scale : 1e-30;
    double e = 0.0;
    for (size_t i = 0; i < n; i++) {
        double den = fabs(ref[i]) > floor_ ? fabs(ref[i]) : floor_;
        double r = fabs((double)a[i] - ref[i]) / den;
        if (!(r <= e)) /* also catches NaN */
            e = r;
    }
    return e;
}

static inline void report(const char *what, double err, double tol)
{
    printf("  %-40s max rel err %.2e  (tol %.0e)\n", what, err, tol);
    fflush(stdout);
}

/* Reports and asserts: float result a against double reference ref. */
#define CHECK_CLOSE(what, a, ref, n, tol)                                      \
    do {                                                                      \
        double err_ = max_rel_err((a), (ref), (n));                           \
        report((what), err_, (tol));                                          \
        ck_assert_msg(err_ < (tol), "%s: max rel err %.3g not below %.0e",    \
                      (what), err_, (tol));                                   \
    } while (0)

/* The objective of a finite-difference check: L(ctx) in double. */
typedef double (*objective_fn)(void *ctx);

/* Central differences of L with respect to every element of x (which L reads). */
static inline void numeric_grad(double *g, objective_fn L, void *ctx, double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = L(ctx);
        x[i] = x0 - FD_H;
        double lm = L(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2.0 * FD_H);
    }
}

/* Finite-difference check of one analytic gradient. */
static inline void check_grad(const char *what, const float *analytic, objective_fn L, void *ctx,
                              double *x, size_t n)
{
    double *num = malloc(n * sizeof *num);
    numeric_grad(num, L, ctx, x, n);
    /* Guard against a vacuous check: the gradient must not be all zero. */
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        mx = fabs(num[i]) > mx ? fabs(num[i]) : mx;
    ck_assert_msg(mx > 1e-3, "%s: numeric gradient is zero, test is vacuous", what);
    CHECK_CLOSE(what, analytic, num, n, TOL_BWD);
    free(num);
}

static inline double dot_r(const double *out, const double *R, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += out[i] * R[i];
    return s;
}

/* Accumulation semantics of a backward: run() adds into the ng buffers
 * grads[g] of sizes[g]. Called twice on zeroed buffers it must double the
 * result; on pre-filled buffers it must add to them. */
static inline void check_accumulate(const char *what, void (*run)(void *), void *ctx, float **grads,
                                    const size_t *sizes, int ng)
{
    for (int g = 0; g < ng; g++) {
        size_t n = sizes[g];
        float *once = malloc(n * sizeof *once);
        float *pre = malloc(n * sizeof *pre);

        for (int h = 0; h < ng; h++)
            memset(grads[h], 0, sizes[h] * sizeof(float));
        run(ctx);
        memcpy(once, grads[g], n * sizeof *once);
        double mx = 0.0;
        for (size_t i = 0; i < n; i++)
            mx = fabs(once[i]) > mx ? fabs(once[i]) : mx;
        ck_assert_msg(mx > 0.0, "%s grad %d: zero gradient, accumulate check is vacuous", what, g);

        run(ctx);
        double e2 = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)grads[g][i] - 2.0 * once[i]);
            e2 = d > e2 ? d : e2;
        }
        ck_assert_msg(e2 <= TOL_ACC * mx, "%s grad %d: twice != 2 x once (err %.3g)", what, g,
                      e2);

        fill(pre, NULL, n, -1.0, 1.0);
        for (int h = 0; h < ng; h++)
            memset(grads[h], 0, sizes[h] * sizeof(float));
        memcpy(grads[g], pre, n * sizeof *pre);
        run(ctx);
        double ep = 0.0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs(((double)grads[g][i] - pre[i]) - once[i]);
            ep = d > ep ? d : ep;
        }
        ck_assert_msg(ep <= TOL_ACC * (mx + 1.0), "%s grad %d: not added to prior contents (err %.3g)",
                      what, g, ep);
        free(once);
        free(pre);
    }
    printf("  %-40s accumulates (+=) into %d gradient(s)\n", what, ng);
    fflush(stdout);
}

/* A suite of one test case per row, each run for the loop index _i in
 * [0, sizes): a kernel's test runs once per size it is given. */
typedef struct {
    const char *name;
    const TTest *test;
    int sizes;
} kernel_case;

static inline Suite *kernel_suite(const char *name, const kernel_case *cases, size_t n)
{
    Suite *s = suite_create(name);
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, cases[i].test, 0, cases[i].sizes);
        suite_add_tcase(s, tc);
    }
    return s;
}

#endif

/* plan_report.c - the planner's answer: a ranked table a person reads, the
 * JSON of design.md section 11 a program reads, and --plan's entry point. */
#include "tt/app/plan.h"
#include "app/plan_internal.h"
#include "tt/core/outpath.h"
#include "tt/model/cost.h"
#include "tt/parallel/pipeline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GIB 1073741824.0

/* Memory in GiB, or in MiB on a cluster of small GPUs (classroom). */
double tt_plan_mem_unit(const tt_plan *pl)
{
    return pl->cluster.gpu_memory_bytes < 4 * GIB ? 1048576.0 : GIB;
}
const char *tt_plan_mem_name(const tt_plan *pl) { return tt_plan_mem_unit(pl) == GIB ? "GiB" : "MiB"; }

static const char *const recompute_names[] = {"none", "selective", "full"};

static void layout_text(char *buf, size_t n, const tt_plan_candidate *c)
{
    char sched[32];
    if (c->pp == 1)
        snprintf(sched, sizeof sched, "-");
    else if (c->virtual_stages > 1)
        snprintf(sched, sizeof sched, "%s v%d", tt_schedule_name(c->schedule), c->virtual_stages);
    else
        snprintf(sched, sizeof sched, "%s", tt_schedule_name(c->schedule));
    snprintf(buf, n, "tp%-2d pp%-2d dp%-4d z%d %-9s %-2s %-14s m%-4d", c->tp, c->pp, c->dp,
             c->zero, recompute_names[c->recompute], c->sequence_parallel ? "sp" : "", sched,
             c->micro_batches);
}

/* The same layout in words, for the "Best:" line a reader quotes. */
static void layout_words(char *buf, size_t n, const tt_plan_candidate *c)
{
    int k = snprintf(buf, n, "tp %d pp %d dp %d, ZeRO %d, recompute %s%s", c->tp, c->pp, c->dp,
                     c->zero, recompute_names[c->recompute],
                     c->sequence_parallel ? ", sequence parallel" : "");
    if (k < 0 || (size_t)k >= n)
        return;
    const char *es = c->micro_batches == 1 ? "" : "es"; /* "1 micro-batch" */
    if (c->pp > 1 && c->virtual_stages > 1)
        snprintf(buf + k, n - (size_t)k, ", %s with %d chunks per stage, %d micro-batch%s",
                 tt_schedule_name(c->schedule), c->virtual_stages, c->micro_batches, es);
    else if (c->pp > 1)
        snprintf(buf + k, n - (size_t)k, ", %s, %d micro-batch%s", tt_schedule_name(c->schedule),
                 c->micro_batches, es);
    else
        snprintf(buf + k, n - (size_t)k, ", %d micro-batch%s", c->micro_batches, es);
}

static void human_seconds(char *buf, size_t n, double s)
{
    if (s < 1)
        snprintf(buf, n, "%.1f ms", s * 1e3);
    else if (s < 120)
        snprintf(buf, n, "%.2f s", s);
    else if (s < 7200)
        snprintf(buf, n, "%.1f min", s / 60);
    else if (s < 3 * 86400)
        snprintf(buf, n, "%.1f h", s / 3600);
    else
        snprintf(buf, n, "%.1f days", s / 86400);
}

void tt_plan_print(FILE *out, const tt_plan *pl, int rows)
{
    const tt_cluster *cl = &pl->cluster;
    const tt_config *m = &pl->model;
    fprintf(out, "Plan: %d layers, dim %d, %d heads, seq %d, vocab %d: %.4g parameters; "
                 "global batch %d sequences\n",
            m->L, m->C, m->NH, m->T, m->V, pl->parameters, pl->batch);
    const double U = tt_plan_mem_unit(pl);
    fprintf(out, "on %d GPU%s of %s (%d per server, %.0f %s each, %s peak %.4g FLOP/s x GEMM "
                 "efficiency %.2f); precision %s\n",
            pl->gpus, pl->gpus == 1 ? "" : "s", cl->name, cl->gpus_per_server, cl->gpu_memory_bytes / U, tt_plan_mem_name(pl),
            pl->mixed ? "16-bit" : "FP32", pl->mixed ? cl->peak_flops : cl->peak_flops_fp32,
            cl->gemm_efficiency, pl->mixed ? "mixed (2+2+12 bytes per parameter)"
                                           : "fp32 (the emulator's 4+4+8 bytes per parameter)");
    int fit = 0;
    for (int i = 0; i < pl->n; i++)
        fit += pl->c[i].fits;
    fprintf(out, "%d layouts evaluated, %d fit; memory is the worst GPU's, time the virtual "
                 "clocks' cost model (doc/planner.md)\n\n", pl->n, fit);
    const int money = pl->train_tokens > 0;
    /* Fixed chunk costs (test clusters) are not FLOPs at a rate: no MFU, as
     * a run on such a cluster prints none. */
    const int has_mfu = !tt_cluster_fixed(cl);
    char memh[16];
    snprintf(memh, sizeof memh, "mem %s", tt_plan_mem_name(pl));
    fprintf(out, " #  %-58s %9s %6s %10s %6s %6s", "layout", memh, "fits", "step",
            "bubble", "MFU");
    if (money)
        fprintf(out, " %9s %9s %11s", "days", "MWh", "cost $");
    fprintf(out, "  why it loses\n");
    /* The best `rows` that fit, then the best few that do not. */
    int shown = 0, shown_nofit = 0;
    for (int i = 0; i < pl->n; i++) {
        const tt_plan_candidate *c = &pl->c[i];
        if (c->fits ? shown >= rows : shown_nofit >= (rows + 1) / 2)
            continue;
        if (c->fits)
            shown++;
        else
            shown_nofit++;
        char lay[96], st[32], mfu[16] = "     -";
        layout_text(lay, sizeof lay, c);
        human_seconds(st, sizeof st, c->step_seconds);
        if (has_mfu)
            snprintf(mfu, sizeof mfu, "%5.1f%%", 100 * c->mfu);
        fprintf(out, "%2d  %-58s %9.2f %6s %10s %5.1f%% %s", i + 1, lay,
                c->memory[TT_PMEM_TOTAL] / U, c->fits ? "yes" : "NO", st, 100 * c->bubble, mfu);
        if (money)
            fprintf(out, " %9.2f %9.1f %11.0f", c->train_seconds / 86400, c->energy_kwh / 1e3,
                    c->cost);
        fprintf(out, "  %s\n", c->why);
    }
    const tt_plan_candidate *b = &pl->c[0];
    char words[160];
    layout_words(words, sizeof words, b);
    fprintf(out, "\nBest: #1, %s%s\n", words, b->fits ? "" : " (none fits: the smallest shown)");
    fprintf(out, "  memory of its worst GPU (stage %d): weights %.3f, gradients %.3f, optimizer "
                 "%.3f, activations %.3f, comm buffers %.3f = %.3f %s\n",
            b->worst_stage, b->memory[TT_PMEM_WEIGHTS] / U, b->memory[TT_PMEM_GRADIENTS] / U,
            b->memory[TT_PMEM_OPTIMIZER] / U, b->memory[TT_PMEM_ACTIVATIONS] / U,
            b->memory[TT_PMEM_COMM] / U, b->memory[TT_PMEM_TOTAL] / U, tt_plan_mem_name(pl));
    char bmfu[48] = "no MFU (fixed chunk costs)";
    if (has_mfu)
        snprintf(bmfu, sizeof bmfu, "MFU %.1f%%", 100 * b->mfu);
    fprintf(out, "  step %.6g s: pipeline %.6g s (bubble %.1f%%), TP collectives %.3g s of it, "
                 "gradient sync %.3g s; %.4g model FLOPs (%.4g hardware), %s\n",
            b->step_seconds, b->pipeline_seconds, 100 * b->bubble, b->tp_seconds, b->dp_seconds,
            b->flops, b->hardware_flops, bmfu);
    if (money) {
        char iv[32], wr[32];
        human_seconds(iv, sizeof iv, pl->checkpoint_interval);
        human_seconds(wr, sizeof wr, pl->checkpoint_write_seconds);
        fprintf(out, "  %.4g tokens: %.2f days, %.1f MWh (x PUE %.2f), $%.0f at $%.3f per kWh\n",
                pl->train_tokens, b->train_seconds / 86400, b->energy_kwh / 1e3, cl->pue, b->cost,
                cl->price_per_kwh);
        fprintf(out, "  checkpoint %.4g GB written in %s; job MTBF %.1f h; save every %s "
                     "(Young/Daly)\n",
                pl->checkpoint_bytes / 1e9, wr, pl->job_mtbf_seconds / 3600, iv);
    }
}

/* Number fields from two parallel arrays; NAN marks a figure the plan does
 * not have (no --train-tokens: no days, energy or cost; fixed chunk costs:
 * no MFU), written as null rather than a 0 a program would take for one. */
static void add_numbers(cJSON *o, const char *const *keys, const double *values, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(values[i]))
            cJSON_AddNullToObject(o, keys[i]);
        else
            cJSON_AddNumberToObject(o, keys[i], values[i]);
    }
}

int tt_plan_write_json(const tt_plan *pl, const char *path, tt_err *e)
{
    const tt_cluster *cl = &pl->cluster;
    const int money = pl->train_tokens > 0, has_mfu = !tt_cluster_fixed(cl);
    cJSON *root = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddNumberToObject(m, "layers", pl->model.L);
    cJSON_AddNumberToObject(m, "dim", pl->model.C);
    cJSON_AddNumberToObject(m, "heads", pl->model.NH);
    cJSON_AddNumberToObject(m, "vocab", pl->model.V);
    cJSON_AddNumberToObject(m, "seq", pl->model.T);
    cJSON_AddNumberToObject(m, "parameters", pl->parameters);
    cJSON_AddNumberToObject(root, "global_batch", pl->batch);
    cJSON_AddStringToObject(root, "precision", pl->mixed ? "mixed" : "fp32");
    cJSON *c = cJSON_AddObjectToObject(root, "cluster");
    cJSON_AddStringToObject(c, "name", cl->name);
    /* The peaks as a cluster file names them (peak_flops the 16-bit one);
     * "precision" above says which one the plan used. */
    static const char *const cluster_keys[] = {
        "gpus", "gpus_per_server", "gpu_memory_bytes", "peak_flops", "peak_flops_fp32",
        "gpu_watts", "price_per_kwh", "gemm_efficiency", "pue", "gpu_mtbf_hours",
        "storage_bandwidth", "checkpoint_write_seconds", "checkpoint_interval_seconds"};
    const double cluster_values[] = {
        pl->gpus, cl->gpus_per_server, cl->gpu_memory_bytes, cl->peak_flops,
        cl->peak_flops_fp32, cl->gpu_watts, cl->price_per_kwh,
        cl->gemm_efficiency, cl->pue, cl->gpu_mtbf_hours, cl->storage_bandwidth,
        pl->checkpoint_write_seconds, pl->checkpoint_interval};
    add_numbers(c, cluster_keys, cluster_values, sizeof cluster_values / sizeof(double));
    cJSON *arr = cJSON_AddArrayToObject(root, "candidates");
    static const char *const mem_keys[TT_PMEM_N] = {"weights", "gradients", "optimizer",
                                                    "activations", "comm", "total"};
    for (int i = 0; i < pl->n; i++) {
        const tt_plan_candidate *p = &pl->c[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "tp", p->tp);
        cJSON_AddNumberToObject(o, "pp", p->pp);
        cJSON_AddNumberToObject(o, "dp", p->dp);
        cJSON_AddNumberToObject(o, "zero", p->zero);
        cJSON_AddStringToObject(o, "recompute", recompute_names[p->recompute]);
        cJSON_AddBoolToObject(o, "sequence_parallel", p->sequence_parallel);
        cJSON_AddStringToObject(o, "schedule", tt_schedule_name(p->schedule));
        /* the chunks per stage priced, the table's "v2" (1 where one runs) */
        cJSON_AddNumberToObject(o, "virtual_stages", p->virtual_stages);
        cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
        cJSON_AddBoolToObject(o, "fits", p->fits);
        cJSON *mb = cJSON_AddObjectToObject(o, "memory_bytes");
        for (int k = 0; k < TT_PMEM_N; k++)
            cJSON_AddNumberToObject(mb, mem_keys[k], p->memory[k]);
        /* After the fields of design.md section 11, the parts of the step
         * the why column compares, and the column itself. */
        static const char *const keys[] = {
            "flops_per_step", "hardware_flops_per_step", "step_seconds", "bubble", "mfu", "train_seconds", "energy_kwh",
            "cost", "pipeline_seconds", "tp_seconds", "dp_seconds", "optimizer_seconds"};
        const double values[] = {p->flops, p->hardware_flops, p->step_seconds, p->bubble,
                                 has_mfu ? p->mfu : NAN, money ? p->train_seconds : NAN,
                                 money ? p->energy_kwh : NAN, money ? p->cost : NAN,
                                 p->pipeline_seconds,
                                 p->tp_seconds, p->dp_seconds, p->optimizer_seconds};
        add_numbers(o, keys, values, sizeof values / sizeof(double));
        cJSON_AddStringToObject(o, "why", p->why);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    /* Under a temporary name, renamed into place only when complete: a
     * failed write never leaves half a plan under the name asked for. */
    char *tmp = tt_temp_name(path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int rc = 0;
    if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0)
        rc = tt_fail(e, "--plan-json: cannot write the plan '%s': %s", path, strerror(errno));
    if (f && fclose(f) && !rc)
        rc = tt_fail(e, "--plan-json: cannot write the plan '%s': %s", path, strerror(errno));
    if (!rc)
        rc = tt_replace_file(tmp, path, "the plan", e);
    if (rc)
        remove(tmp);
    free(tmp);
    free(text);
    return rc;
}

int tt_plan_main(const tt_run_config *rc)
{
    tt_plan pl;
    tt_err e;
    /* The JSON's path is checked before the planning, not after it, with
     * the inputs it must not overwrite (a --cluster file, --resume). A path that
     * cannot be written is a runtime error (status 1), as for --save,
     * --log and --plot, not a usage error. */
    if (tt_config_outputs_check(rc, &e)) {
        fprintf(stderr, "tiny_transformer: %s\n", e.msg);
        return TT_EXIT_RUNTIME;
    }
    if (tt_plan_make(&pl, rc, &e)) {
        fprintf(stderr, "tiny_transformer: %s\n", e.msg);
        return TT_EXIT_USAGE;
    }
    tt_plan_print(stdout, &pl, 10);
    int status = 0;
    if (rc->plan_json && tt_plan_write_json(&pl, rc->plan_json, &e)) {
        fprintf(stderr, "tiny_transformer: %s\n", e.msg);
        status = TT_EXIT_RUNTIME;
    }
    tt_plan_free(&pl);
    return status;
}

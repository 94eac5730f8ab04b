/* cluster.c - the built-in modelled machines, cluster files, and the cost of
 * an operation on a machine (doc/clocks.md gives every number's source). */
#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "tt/core/cluster.h"
#include "core/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* DGX figures are NVIDIA's data-sheet peaks (dense, no sparsity); NVLink is
 * the per-GPU total divided by two directions; the network is one rail NIC
 * per GPU (HDR 200 Gb/s on A100 systems, NDR 400 Gb/s on H100). The MTBF
 * follows Meta's Llama 3 report (419 unexpected interruptions in 54 days on
 * 16,384 GPUs: about 50,000 GPU-hours between failures) and its storage
 * (2 TB/s sustained to the checkpoint file system). classroom is scaled
 * so that the default tiny model sees the ratios a GPT-3-sized model sees on
 * DGX servers (doc/clocks.md works them out; tests/test_clock checks them). */
static const tt_cluster builtin[] = {
    {.name = "classroom",
     .about = "scaled-down DGX for the default tiny model: 4 GPUs per server, "
              "10 GFLOP/s FP32, NVLink 200 MB/s, network 100 MB/s",
     .gpus_per_server = 4, .peak_flops = 80e9, .peak_flops_fp32 = 10e9,
     .gemm_efficiency = 0.5, .memory_bandwidth = 1e9, .gpu_memory_bytes = 64 * 1024 * 1024,
     .nvlink = {200e6, 10e-6}, .network = {100e6, 20e-6},
     .gpu_watts = 400, .pue = 1.2, .price_per_kwh = 0.15, .gpu_mtbf_hours = 50000,
     .storage_bandwidth = 1e9},
    {.name = "dgx-a100",
     .about = "DGX A100 80GB: 8 GPUs per server, 312 TFLOP/s BF16, NVLink 3, "
              "HDR InfiniBand 200 Gb/s per GPU",
     .gpus_per_server = 8, .peak_flops = 312e12, .peak_flops_fp32 = 19.5e12,
     .gemm_efficiency = 0.7, .memory_bandwidth = 2.039e12, .gpu_memory_bytes = 80 * GIB,
     .nvlink = {300e9, 3e-6}, .network = {25e9, 5e-6},
     .gpu_watts = 400, .pue = 1.2, .price_per_kwh = 0.15, .gpu_mtbf_hours = 50000,
     .storage_bandwidth = 2e12},
    {.name = "dgx-h100",
     .about = "DGX H100: 8 GPUs per server, 989 TFLOP/s BF16, NVLink 4, "
              "NDR InfiniBand 400 Gb/s per GPU",
     .gpus_per_server = 8, .peak_flops = 989e12, .peak_flops_fp32 = 67e12,
     .gemm_efficiency = 0.7, .memory_bandwidth = 3.35e12, .gpu_memory_bytes = 80 * GIB,
     .nvlink = {450e9, 3e-6}, .network = {50e9, 5e-6},
     .gpu_watts = 700, .pue = 1.2, .price_per_kwh = 0.15, .gpu_mtbf_hours = 50000,
     .storage_bandwidth = 2e12},
};
enum { NBUILTIN = sizeof builtin / sizeof builtin[0] };

const char *tt_cluster_names(void) { return "classroom|dgx-a100|dgx-h100"; }

static const tt_cluster *find_builtin(const char *name)
{
    for (int i = 0; i < NBUILTIN; i++)
        if (!strcmp(builtin[i].name, name))
            return &builtin[i];
    return NULL;
}

int tt_cluster_builtin(const char *name) { return find_builtin(name) != NULL; }

/* The fields a cluster file may set: name, where, and the accepted range. */
typedef struct {
    const char *key;
    size_t off;
    double lo, hi;  /* inclusive */
} field;
#define F(k, member, lo, hi) {k, offsetof(tt_cluster, member), lo, hi}
static const field fields[] = {
    F("peak_flops", peak_flops, 1, 1e18),
    F("peak_flops_fp32", peak_flops_fp32, 1, 1e18),
    F("gemm_efficiency", gemm_efficiency, 1e-3, 1),
    F("memory_bandwidth", memory_bandwidth, 1, 1e15),
    F("gpu_memory_bytes", gpu_memory_bytes, 1, 1e15),
    F("nvlink_bandwidth", nvlink.bandwidth, 0, 1e15),
    F("nvlink_latency", nvlink.latency, 0, 1),
    F("network_bandwidth", network.bandwidth, 0, 1e15),
    F("network_latency", network.latency, 0, 1),
    F("gpu_watts", gpu_watts, 0, 1e5),
    F("pue", pue, 1, 10),
    F("price_per_kwh", price_per_kwh, 0, 1e3),
    F("gpu_mtbf_hours", gpu_mtbf_hours, 1e-3, 1e9),
    F("storage_bandwidth", storage_bandwidth, 1, 1e15),
    F("fixed_forward", fixed_forward, 0, 1e6),
    F("fixed_backward", fixed_backward, 0, 1e6),
    F("fixed_w", fixed_w, 0, 1e6),
};
#undef F

/* A field's value as the file wrote it, for the message that refuses it
 * (cut at 40 characters: a wrong value may be a whole object). */
static const char *json_text(const cJSON *it, char *buf, size_t size)
{
    char *t = cJSON_PrintUnformatted(it);
    snprintf(buf, size, "%.40s%s", t ? t : "?", t && strlen(t) > 40 ? "..." : "");
    free(t);
    return buf;
}

static int load_file(tt_cluster *c, const char *path, tt_err *e)
{
    const char *why = NULL;
    FILE *f = tt_fopen_regular(path, "rb", &why);
    if (!f)
        return tt_fail(e, "--cluster %s: not a built-in cluster (%s) and not a readable file: %s",
                       path, tt_cluster_names(), why);
    /* A cluster file is a few hundred bytes; 64 KiB bounds a wrong file. */
    char *text = tt_malloc(65537);
    size_t n = fread(text, 1, 65536, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    text[n] = 0;
    if (more) {
        free(text);
        return tt_fail(e, "--cluster %s: larger than 64 KiB, not a cluster file", path);
    }
    /* The whole file is the JSON, as a checkpoint's header is. */
    size_t pos;
    cJSON *root = tt_json_parse_whole(text, n, &pos);
    free(text);
    if (!root)
        return tt_fail(e, "--cluster %s: not valid JSON (at byte %zu of %zu; doc/clocks.md shows "
                          "the format)", path, pos, n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return tt_fail(e, "--cluster %s: not a JSON object (doc/clocks.md shows the format)",
                       path);
    }
    int rc = 0;
    const char *twice = tt_json_repeated_key(root);
    if (twice) {
        rc = tt_fail(e, "--cluster %s: the field \"%.80s\" is given twice (give each field once)",
                     path, twice);
        goto out;
    }
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "based_on");
    const tt_cluster *b = cJSON_IsString(base) ? find_builtin(base->valuestring) : NULL;
    char got[48];
    if (base && !b) {
        rc = tt_fail(e, "--cluster %s: based_on must name a built-in cluster (%s), not %s", path,
                     tt_cluster_names(), json_text(base, got, sizeof got));
        goto out;
    }
    memset(c, 0, sizeof *c);
    if (b)
        *c = *b;
    snprintf(c->about, sizeof c->about, "from %s%s%s", path, b ? ", based on " : "",
             b ? b->name : "");
    char seen[sizeof fields / sizeof fields[0]] = {0};
    const cJSON *it;
    cJSON_ArrayForEach(it, root) {
        const char *k = it->string;
        if (!strcmp(k, "based_on"))
            continue;
        if (!strcmp(k, "name")) {
            if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > 40) {
                rc = tt_fail(e, "--cluster %s: name must be a string of 1-40 characters, not %s",
                             path, json_text(it, got, sizeof got));
                goto out;
            }
            snprintf(c->name, sizeof c->name, "%s", it->valuestring);
            continue;
        }
        if (!strcmp(k, "gpus_per_server")) {
            if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > 1 << 20 ||
                it->valuedouble != floor(it->valuedouble)) {
                rc = tt_fail(e, "--cluster %s: gpus_per_server must be a whole number "
                             "from 1 to 1048576, not %s", path, json_text(it, got, sizeof got));
                goto out;
            }
            c->gpus_per_server = (int)it->valuedouble;
            continue;
        }
        const field *fd = NULL;
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (!strcmp(fields[i].key, k))
                fd = &fields[i];
        if (!fd) {
            rc = tt_fail(e, "--cluster %s: unknown field \"%s\" (doc/clocks.md lists them)",
                         path, k);
            goto out;
        }
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= fd->lo && it->valuedouble <= fd->hi)) {
            rc = tt_fail(e, "--cluster %s: %s must be a number from %g to %g, not %s", path, k,
                         fd->lo, fd->hi, json_text(it, got, sizeof got));
            goto out;
        }
        *(double *)((char *)c + fd->off) = it->valuedouble;
        seen[fd - fields] = 1;
    }
    if (!c->name[0])
        snprintf(c->name, sizeof c->name, "%s", b ? b->name : "custom");
    /* Without a built-in to start from, every field must come from the file
     * (the fixed chunk costs aside: tests' and labs' switches, off when
     * absent). Whether a field came is recorded as it is read: a value
     * test cannot tell an absent link latency from a free one. */
    if (!b)
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            const int optional = !strncmp(fields[i].key, "fixed_", 6);
            if ((!seen[i] && !optional) || c->gpus_per_server < 1) {
                rc = tt_fail(e, "--cluster %s: %s missing (or give \"based_on\": a built-in)",
                             path, c->gpus_per_server < 1 ? "gpus_per_server" : fields[i].key);
                goto out;
            }
        }
out:
    cJSON_Delete(root);
    return rc;
}

int tt_cluster_load(tt_cluster *c, const char *name_or_file, tt_err *e)
{
    const tt_cluster *b = find_builtin(name_or_file);
    if (b) {
        *c = *b;
        return 0;
    }
    return load_file(c, name_or_file, e);
}

int tt_cluster_server(const tt_cluster *c, int world_rank)
{
    return world_rank / (c->gpus_per_server > 0 ? c->gpus_per_server : 1);
}

const tt_link *tt_cluster_link(const tt_cluster *c, int a, int b)
{
    return tt_cluster_server(c, a) == tt_cluster_server(c, b) ? &c->nvlink : &c->network;
}

double tt_cost_compute(const tt_cluster *c, double flops, double bytes)
{
    return tt_cost_compute_at(c, c->peak_flops_fp32, flops, bytes);
}

double tt_cost_compute_at(const tt_cluster *c, double peak, double flops, double bytes)
{
    double tc = flops / (peak * c->gemm_efficiency);
    double tm = bytes / c->memory_bandwidth;
    return tc > tm ? tc : tm;
}

double tt_cost_link(const tt_link *l, double bytes)
{
    return l->latency + (l->bandwidth > 0 ? bytes / l->bandwidth : 0.0);
}

double tt_ring_bytes(tt_coll_kind kind, int n, double bytes)
{
    if (n <= 1)
        return 0.0;
    switch (kind) {
    case TT_COLL_ALLREDUCE: return 2.0 * (n - 1) / n * bytes;
    default: return (double)(n - 1) / n * bytes;
    }
}

double tt_cost_collective(const tt_link *l, tt_coll_kind kind, int n, double bytes)
{
    if (n <= 1)
        return 0.0;
    const int steps = kind == TT_COLL_ALLREDUCE ? 2 * (n - 1) : n - 1;
    const double per_step = bytes / n;
    return steps * tt_cost_link(l, per_step);
}

/* ckpt_internal.h - (internal, not installed) what the parts of the
 * checkpoint code share. The public API is tt/train/checkpoint.h; behind it:
 *
 *   ckpt_format.c  the safetensors layout: byte order, where every stored
 *                  array lies, the header and its framing
 *   ckpt_meta.c    the __metadata__ map: writing its keys, reading them back
 *                  (tt_checkpoint_read_info) and the per-tensor checksums
 *   ckpt_write.c   the serial writer (tt_checkpoint_save) and the
 *                  temporary-then-rename protocol both writers follow
 *   ckpt_mpiio.c   the collective writer (tt_checkpoint_save_sharded), and
 *   ckpt_shards.c  what it checks first: the ranks' shards tile the model
 *   ckpt_read.c    the reader (tt_checkpoint_load): opening and validating a
 *                  file that may be hostile
 *
 * A file is one u64 little-endian header length N, N bytes of JSON header
 * (space-padded so the data starts 8-byte aligned), then the data section:
 * the weights in parameter-table order, then optim.m.<name> for every tensor,
 * then optim.v.<name>, contiguously. Both writers take every offset and the
 * header from ckpt_format.c, which is why their files are the same bytes.
 * (The collective writer is one part in two files only to keep each short.) */
#ifndef TT_CKPT_INTERNAL_H
#define TT_CKPT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "tt/comm/grid.h"
#include "tt/core/params.h"
#include "tt/train/checkpoint.h"

/* A header bigger than this is not one we wrote: refuse it before allocating. */
#define CKPT_HEADER_MAX (100ull * 1024 * 1024)
/* JSON numbers are doubles: integers above 2^53 would not be exact. */
#define CKPT_INT_MAX 9007199254740992.0
/* safetensors allows any rank; we bound it only to keep the parser simple. */
#define CKPT_MAX_DIMS 8
/* Floats converted per chunk when writing (bounds the scratch buffer). */
#define CKPT_CHUNK 16384
/* "crc32." + "optim.m." + a tensor name fits easily. */
#define CKPT_KEY_MAX (TT_NAME_MAX + 32)

/* The three arrays stored per tensor, in file order: weights, then the Adam
 * moments. Array s = kind * p->n + i of a table p is array `kind` of tensor i;
 * offsets and checksums are indexed that way. */
enum { CKPT_KIND_W, CKPT_KIND_M, CKPT_KIND_V, CKPT_KINDS };

/* ---- ckpt_format.c ---- */

/* Tensor t's array of one stored kind, and its name in the file
 * ("optim.m." etc. + t->name; out holds CKPT_KEY_MAX). */
/* The table's kind (TT_W, TT_M, TT_V) of a stored kind (CKPT_KIND_*). */
tt_kind ckpt_kind_of(int kind);
float *ckpt_kind_data(const tt_tensor *t, int kind);
void ckpt_stored_name(char *out, size_t cap, const tt_tensor *t, int kind);

/* n floats to and from the file's little-endian bytes. */
void ckpt_floats_to_le(unsigned char *dst, const float *src, size_t n);
void ckpt_floats_from_le(float *dst, const unsigned char *src, size_t n);

/* Elements stored for t: its global tensor (real rows only). */
size_t ckpt_stored_numel(const tt_tensor *t);

/* Fills off[s] with the byte offset in the data section of every stored
 * array s of the global table p; returns the size of the data section. */
uint64_t ckpt_stored_offsets(const tt_params *p, uint64_t *off);

/* Everything before the data section, ready to write: the length, the JSON
 * header for global table p with checksums crc[s] and offsets off[s], and
 * the padding. Sets *size; NULL when cJSON runs out of memory. Its length
 * does not depend on the checksums' values. */
unsigned char *ckpt_framed_header(const tt_params *p, const tt_ckpt_info *info,
                                  const uint32_t *crc, const uint64_t *off, size_t *size);

/* Whether shard t is a slice inside its global tensor whose local shape fits
 * its split, so copies between shard and file stay in bounds. */
int ckpt_shard_is_consistent(const tt_tensor *t);

/* A string taken from a file, made fit for a one-line message (at most
 * about 60 characters, control bytes replaced); returns out. */
const char *ckpt_printable(const char *s, char *out, size_t cap);

/* ---- ckpt_write.c: the protocol both writers follow ---- */

/* After the rename: makes the rename itself durable (best effort). */
void ckpt_sync_parent_dir(const char *path);

/* ---- ckpt_shards.c ---- */

/* Collective over the world: 0 on every rank when each rank's shards in
 * `local` are consistent slices of the tensors of `whole` and the writing
 * shards of all ranks hold every element exactly once; else -1 on every
 * rank with the same message. */
int ckpt_check_shards(const char *path, const tt_grid *g, const tt_params *whole,
                      const tt_params *local, tt_err *e);

/* ---- ckpt_read.c ---- */

/* An open checkpoint whose header has been validated. */
typedef struct {
    const char *path;
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_size;  /* bytes after the header */
    cJSON *root;
    cJSON *meta;         /* the __metadata__ map: every value a string */
    uint32_t header_crc; /* CRC-32 of the header's bytes (which list every
                            tensor's own CRC-32): the file's fingerprint */
} ckpt_file;

/* The open file's fingerprint (tt_ckpt_info.fingerprint). */
uint32_t ckpt_fingerprint(const ckpt_file *cf);

/* Opens path and validates the whole header: length, JSON, metadata, format,
 * and every tensor entry against the size of the file. On failure nothing
 * is left open. */
int ckpt_open(ckpt_file *cf, const char *path, tt_err *e);
void ckpt_close(ckpt_file *cf);

/* ---- ckpt_meta.c ---- */

/* Adds the run's keys (format, step, model, hyper-parameters, layout) to the
 * header's __metadata__ map, then "crc32.<name>" for every stored array of
 * table p in file order. 0, or -1 when cJSON runs out of memory. */
int ckpt_meta_put(cJSON *meta, const tt_ckpt_info *info);
int ckpt_meta_put_checksums(cJSON *meta, const tt_params *p, const uint32_t *crc);

/* Checks that cf->root has a __metadata__ map of strings naming our format,
 * and sets cf->meta. */
int ckpt_meta_check(ckpt_file *cf, tt_err *e);

/* The checksum the metadata records for stored array `name`. */
int ckpt_meta_checksum(const ckpt_file *cf, const char *name, uint32_t *crc, tt_err *e);

#endif

/* tt/train/checkpoint.h - checkpoints as safetensors files (doc/design.md section 6).
 *
 * The file holds the global, unsharded tensors under their global names
 * (vocabulary tensors with their V real rows), the Adam moments as
 * optim.m.<name> / optim.v.<name>, and a __metadata__ map of strings: format
 * version, step, every hyper-parameter, the model config, the layout that wrote
 * it and a CRC-32 per tensor. A file is written under NAME.tmp.<pid> and renamed
 * onto NAME only when complete. */
#ifndef TT_CHECKPOINT_H
#define TT_CHECKPOINT_H

#include "tt/core/common.h"
#include "tt/core/config.h"
#include "tt/comm/grid.h"
#include <limits.h>

#include "tt/core/params.h"

#define TT_CKPT_FORMAT "tiny_transformer/1"

/* What a checkpoint says about the run that wrote it. */
typedef struct {
    long step;          /* optimizer steps completed */
    tt_run_config run;  /* model config and hyper-parameters (no file names) */
    int tp, pp, dp;     /* layout that wrote it */
    /* Read only, never written: */
    uint32_t fingerprint; /* the header's CRC-32 (which lists every tensor's own) mixed
                           * with the file's size: ranks that each open the file compare
                           * it, so that they resume from one checkpoint */
    int lists_depth;      /* the header lists the last block of the stated depth */
    /* The corpus it trained on (written from run.data): the --data file as
     * given, "" for the generated corpus; has_data 0 for a checkpoint from
     * before the key existed, which says nothing either way. */
    char data[PATH_MAX];
    int has_data;
    uint64_t data_bytes; /* the file's size and CRC-32 (data_bytes 0: not recorded) */
    uint32_t data_crc;
} tt_ckpt_info;

/* Writes every shard of p (which must hold whole tensors, i.e. one virtual GPU)
 * with its moments. Fails without touching `path` if anything goes wrong. */
int tt_checkpoint_save(const char *path, const tt_params *p, const tt_ckpt_info *info,
                       tt_err *e);

/* Collective over the grid's world: writes the same file, byte for byte, as
 * tt_checkpoint_save would for the whole model (info->run.model) holding the
 * values of the shards, each rank writing its own slices with MPI-IO. local
 * is this rank's table (any subset of the model's tensors, any slices); the
 * canonical shards (tt_tensor_canonical) must hold every element of the model
 * exactly once, which is checked before anything is written. The file is written under NAME.tmp.<pid of rank 0> and renamed
 * onto `path` only when complete; on any failure on any rank, every rank
 * returns -1 with the same message, the temporary is removed and `path` is
 * left as it was. */
int tt_checkpoint_save_sharded(const char *path, const tt_grid *g, const tt_params *local,
                               const tt_ckpt_info *info, tt_err *e);

/* Collective over the grid's world: 0 when every rank sees the file rank 0
 * makes under path's temporary name (removed again), -1 with the same
 * message on every rank when some rank does not (ranks on filesystems of
 * their own, where one checkpoint file cannot be written together). */
int tt_checkpoint_shared_check(const char *path, const tt_grid *g, tt_err *e);

/* Reads the header and metadata only (model config, step, hyper-parameters,
 * the file's fingerprint, whether it lists its stated depth). */
int tt_checkpoint_read_info(const char *path, tt_ckpt_info *info, tt_err *e);
/* -1 with a message naming the file when info (read from path) states more
 * blocks than the header lists (no blocks.<layers-1>.mlp.fc2.weight): a
 * resumed run checks this before it builds a model that deep. */
int tt_checkpoint_check_depth(const char *path, const tt_ckpt_info *info, tt_err *e);

/* Loads every shard's slice (weights and moments) from the file, verifying
 * shapes and checksums. The caller has already matched the model config. */
int tt_checkpoint_load(const char *path, tt_params *p, tt_err *e);

/* As tt_checkpoint_load, for a run that read the file's header first
 * (tt_checkpoint_read_info): refuses, loading nothing, a file whose
 * fingerprint is no longer `fingerprint` (replaced in between). */
int tt_checkpoint_load_same(const char *path, uint32_t fingerprint, tt_params *p, tt_err *e);

#endif

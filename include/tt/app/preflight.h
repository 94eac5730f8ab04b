/* tt/app/preflight.h - what a run checks before it allocates the model:
 * that this GPU's share fits the host (and --gpu-mem, for the parameters
 * alone), and that every rank read the same corpus. */
#ifndef TT_APP_PREFLIGHT_H
#define TT_APP_PREFLIGHT_H

#include "tt/comm/grid.h"
#include "tt/core/common.h"
#include "tt/core/config.h"
#include "tt/core/data.h"
#include "tt/model/model.h"

/* This rank's verdict (not agreed; the caller agrees it): 0 when GPU spec of
 * the run fits, -1 with a message giving what it needs when its parameter
 * buffers alone exceed --gpu-mem, or when an upper bound of everything it
 * will allocate exceeds this host's memory per rank. Collective over the
 * world (it counts the ranks on this host). */
int tt_preflight_memory(const tt_run_config *rc, const tt_grid *g, const tt_shard_spec *spec,
                        tt_err *e);

/* Collective: 0 when every rank holds the same corpus (its size, and crc,
 * its CRC-32 as the caller computed it), else -1 on every rank with a
 * message naming `path`. */
int tt_preflight_corpus(const tt_grid *g, const tt_corpus *c, uint32_t crc, const char *path,
                        tt_err *e);

#endif

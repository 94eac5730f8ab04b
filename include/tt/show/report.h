/* tt/show/report.h - everything the run reports about its virtual GPUs, in
 * one include: communication measured against its formulas
 * (tt/show/report_comm.h), memory and the out-of-memory verdict
 * (tt/show/report_memory.h), every GPU's tensors and slices
 * (tt/show/report_shards.h), and the pipeline's stages, bubble and narrated
 * step (tt/show/pipeline_report.h). */
#ifndef TT_REPORT_H
#define TT_REPORT_H

#include "tt/show/pipeline_report.h"
#include "tt/show/report_comm.h"
#include "tt/show/report_memory.h"
#include "tt/show/report_shards.h"

#endif

/* trace_name.h - the one-line name of a trace event, the same in both views
 * (the Chrome trace's event names, the SVG timeline's tooltips), so a box in
 * one can be found in the other. Internal to the library (not installed). */
#ifndef TT_SHOW_TRACE_NAME_H
#define TT_SHOW_TRACE_NAME_H

#include <stddef.h>
#include "tt/show/trace.h"

/* E.g. "forward mb3 chunk 1", "all-reduce TP 12.3 KB",
 * "send PP 6.1 KB to gpu4(dp0,pp1,tp0)", a named call "loss all-reduce
 * (other) 8 B", "oracle (paused clock)"; truncated to n bytes. */
void tt_trace_event_name(const tt_grid *g, const tt_event *v, char *buf, size_t n);

#endif

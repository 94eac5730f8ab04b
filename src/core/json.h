/* json.h - (private) a text that must be one JSON value and nothing more:
 * a checkpoint's header, a cluster file. */
#ifndef TT_CORE_JSON_H
#define TT_CORE_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Parses text[0, n): the value, or NULL when the text is not valid JSON or
 * holds anything after the value but white space (a second value, a NUL and
 * more: ignoring it would take a damaged file for a good one). *stop: the
 * byte where the text stops being one value (n when it is one). */
cJSON *tt_json_parse_whole(const char *text, size_t n, size_t *stop);

#endif

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

/* The first key that appears twice in one object anywhere in v, or NULL.
 * JSON leaves a repeated key's meaning open and readers differ (cJSON finds
 * the first, others keep the last), so our files refuse one. The string
 * lives as long as v. */
const char *tt_json_repeated_key(const cJSON *v);

#endif

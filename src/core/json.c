/* json.c - a text that must be one JSON value and nothing more (json.h):
 * cJSON stops at the end of the first value and would ignore the rest. */
#include "core/json.h"

#include <string.h>

cJSON *tt_json_parse_whole(const char *text, size_t n, size_t *stop)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    size_t pos = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
    if (root)
        while (pos < n && text[pos] != '\0' && strchr(" \t\r\n", text[pos]))
            pos++;
    *stop = pos;
    if (root && pos != n) {
        cJSON_Delete(root);
        root = NULL;
    }
    return root;
}

/* json.c - a text that must be one JSON value and nothing more (json.h):
 * cJSON stops at the end of the first value and would ignore the rest; and
 * an object that names a key twice, which cJSON would read as its first. */
#include "core/json.h"
#include "tt/core/common.h"

#include <stdlib.h>
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

static int by_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *tt_json_repeated_key(const cJSON *v)
{
    if (!v)
        return NULL;
    const char *found = NULL;
    if (cJSON_IsObject(v)) {
        /* sorted, so a repeated key sits beside its twin: n log n for a
         * header of thousands of tensors */
        size_t n = 0;
        for (const cJSON *k = v->child; k; k = k->next)
            n++;
        const char **keys = tt_malloc((n ? n : 1) * sizeof *keys);
        n = 0;
        for (const cJSON *k = v->child; k; k = k->next)
            keys[n++] = k->string ? k->string : "";
        qsort(keys, n, sizeof *keys, by_key);
        for (size_t i = 1; i < n && !found; i++)
            if (strcmp(keys[i - 1], keys[i]) == 0)
                found = keys[i];
        free(keys);
    }
    for (const cJSON *k = v->child; k && !found; k = k->next)
        found = tt_json_repeated_key(k);
    return found;
}

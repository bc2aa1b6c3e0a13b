/* metadata.json of a build variant (kernel-hub-format §6). */
#include "kernel/kernel_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define HK_METADATA_MAX (1u << 20)

static char *dup_str_field(const cJSON *obj, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(it) ? hk__strdup(it->valuestring) : NULL;
}

void hk__metadata_free(hk_metadata_owned *md) {
    if (!md) return;
    free((char *)md->pub.name);
    free((char *)md->pub.id);
    free((char *)md->pub.license);
    free((char *)md->pub.backend);
    free((char *)md->pub.upstream);
    free((char *)md->pub.source);
    hk__kstrv_free(md->archs, md->pub.num_archs);
    memset(md, 0, sizeof *md);
}

int hk__metadata_parse(hk_metadata_owned *md, const char *json, size_t len, const char *what) {
    memset(md, 0, sizeof *md);
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return hk__fail(HK_ERR_PARSE, "%s is not a JSON object; the variant is damaged: re-download it",
                       what);
    }
    int rc = HK_OK;
    const char *missing = NULL;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *license = cJSON_GetObjectItemCaseSensitive(root, "license");
    const cJSON *backend = cJSON_GetObjectItemCaseSensitive(root, "backend");
    const cJSON *btype = cJSON_IsObject(backend) ? cJSON_GetObjectItemCaseSensitive(backend, "type") : NULL;
    if (!cJSON_IsString(name)) missing = "name";
    else if (!cJSON_IsString(id)) missing = "id";
    else if (!cJSON_IsNumber(version)) missing = "version";
    else if (!cJSON_IsString(license)) missing = "license";
    else if (!cJSON_IsString(btype)) missing = "backend.type";
    if (missing) {
        rc = hk__fail(HK_ERR_PARSE,
                     "%s lacks the required field '%s' (builds older than kernels 0.14 carry only "
                     "python-depends; use a newer version of the kernel)",
                     what, missing);
        goto done;
    }
    md->pub.name = hk__strdup(name->valuestring);
    md->pub.id = hk__strdup(id->valuestring);
    md->pub.version = version->valueint;
    md->pub.license = hk__strdup(license->valuestring);
    md->pub.backend = hk__strdup(btype->valuestring);
    md->pub.upstream = dup_str_field(root, "upstream");
    md->pub.source = dup_str_field(root, "source");
    if (!md->pub.name || !md->pub.id || !md->pub.license || !md->pub.backend) {
        rc = hk__fail(HK_ERR_NOMEM, "out of memory");
        goto done;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(backend, "archs");
    if (cJSON_IsArray(archs)) {
        int n = cJSON_GetArraySize(archs);
        if (n > 0) {
            md->archs = calloc((size_t)n, sizeof *md->archs);
            if (!md->archs) {
                rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                goto done;
            }
            const cJSON *a;
            cJSON_ArrayForEach(a, archs) {
                if (!cJSON_IsString(a)) continue;
                char *c = hk__strdup(a->valuestring);
                if (!c) {
                    rc = hk__fail(HK_ERR_NOMEM, "out of memory");
                    goto done;
                }
                md->archs[md->pub.num_archs++] = c;
            }
        }
    }
    md->pub.archs = (const char *const *)md->archs;
done:
    cJSON_Delete(root);
    if (rc) hk__metadata_free(md);
    return rc;
}

int hk__metadata_read(hk_metadata_owned *md, const char *variant_dir) {
    char *path = hk__path_join(variant_dir, "metadata.json");
    if (!path) return hk__fail(HK_ERR_NOMEM, "out of memory");
    char *data = NULL;
    size_t len = 0;
    int rc = hk__read_file(&data, &len, path, HK_METADATA_MAX);
    if (rc == HK_ERR_NOT_FOUND)
        rc = hk__fail(HK_ERR_NOT_FOUND, "%s has no metadata.json: it is not a kernel build variant",
                     variant_dir);
    if (rc == HK_OK) rc = hk__metadata_parse(md, data, len, path);
    free(data);
    free(path);
    return rc;
}

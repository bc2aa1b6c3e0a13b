/* The schema of a benchmark submission, as kernels 0.17.2 `kernels benchmark --upload` sends it
 * (kernels/cli/benchmark.py BenchmarkResult.to_payload):
 *
 *   {"results": [{"workload": str, "timingResults": {mean_ms, std_ms, min_ms, max_ms, q1_ms, q3_ms,
 *                 iqr_ms: number, outliers: int, iterations: int}, "verified"?: bool}, ...],
 *    "machineInfo": {"gpu", "backend", "pytorchVersion", "os", "cpu": str, "gpuCores"?: int},
 *    "kernelCommitSha": str, "benchmarkScriptPath": str, "benchmarkScriptSha"?: 64 hex}
 *
 * Checked strictly (a mirror keeps what it accepts): every listed key of the right type, no other
 * keys, numbers finite and not negative, iterations > 0, min_ms <= max_ms (kernels' own
 * TimingResults checks), workloads unique, strings bounded and free of control characters. The
 * first problem found is described by its JSON path ("results[2].timingResults.iterations: ..."). */
#include "server/srv_bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_RESULTS 1000
#define MAX_STR 256
#define MAX_PATH_STR 1024

static bool bad(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return false;
}

static bool only_keys(const cJSON *o, const char *const *keys, const char *where, char *err, size_t cap) {
    for (const cJSON *it = o->child; it; it = it->next) {
        bool known = false;
        for (size_t k = 0; keys[k] && !known; k++) known = strcmp(it->string, keys[k]) == 0;
        if (!known) return bad(err, cap, "%s: unknown field '%.64s'", where, it->string);
    }
    return true;
}

static bool check_str(const cJSON *o, const char *key, bool required, size_t max, const char *where, char *err,
                      size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return required ? bad(err, cap, "%s.%s: missing (a string)", where, key) : true;
    if (!cJSON_IsString(v)) return bad(err, cap, "%s.%s: must be a string", where, key);
    size_t n = strlen(v->valuestring);
    if (n > max) return bad(err, cap, "%s.%s: longer than %zu bytes", where, key, max);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v->valuestring[i] < 0x20 || v->valuestring[i] == 0x7f)
            return bad(err, cap, "%s.%s: contains a control character", where, key);
    return true;
}

static bool check_num(const cJSON *o, const char *key, bool integer, const char *where, char *err, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return bad(err, cap, "%s.%s: missing (a number)", where, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(err, cap, "%s.%s: must be a finite number", where, key);
    if (v->valuedouble < 0) return bad(err, cap, "%s.%s: must not be negative", where, key);
    if (integer && (v->valuedouble != floor(v->valuedouble) || v->valuedouble > 9007199254740992.0))
        return bad(err, cap, "%s.%s: must be an integer", where, key);
    return true;
}

static bool check_timing(const cJSON *t, const char *where, char *err, size_t cap) {
    static const char *const ms[] = {"mean_ms", "std_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "iqr_ms", NULL};
    static const char *const keys[] = {"mean_ms", "std_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "iqr_ms",
                                       "outliers", "iterations", NULL};
    if (!cJSON_IsObject(t)) return bad(err, cap, "%s: must be an object", where);
    if (!only_keys(t, keys, where, err, cap)) return false;
    for (size_t k = 0; ms[k]; k++)
        if (!check_num(t, ms[k], false, where, err, cap)) return false;
    if (!check_num(t, "outliers", true, where, err, cap) || !check_num(t, "iterations", true, where, err, cap))
        return false;
    if (cJSON_GetObjectItemCaseSensitive(t, "iterations")->valuedouble < 1)
        return bad(err, cap, "%s.iterations: must be > 0", where);
    if (cJSON_GetObjectItemCaseSensitive(t, "min_ms")->valuedouble >
        cJSON_GetObjectItemCaseSensitive(t, "max_ms")->valuedouble)
        return bad(err, cap, "%s: min_ms must be <= max_ms", where);
    return true;
}

static bool check_results(const cJSON *rs, char *err, size_t cap) {
    static const char *const keys[] = {"workload", "timingResults", "verified", NULL};
    if (!rs) return bad(err, cap, "results: missing (an array of workload results)");
    if (!cJSON_IsArray(rs)) return bad(err, cap, "results: must be an array");
    int n = cJSON_GetArraySize(rs);
    if (n < 1) return bad(err, cap, "results: must hold at least one workload");
    if (n > MAX_RESULTS) return bad(err, cap, "results: more than %d workloads", MAX_RESULTS);
    int i = 0;
    for (const cJSON *r = rs->child; r; r = r->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "results[%d]", i);
        if (!cJSON_IsObject(r)) return bad(err, cap, "%s: must be an object", where);
        if (!only_keys(r, keys, where, err, cap) || !check_str(r, "workload", true, MAX_STR, where, err, cap))
            return false;
        const char *wl = cJSON_GetObjectItemCaseSensitive(r, "workload")->valuestring;
        if (!*wl) return bad(err, cap, "%s.workload: must not be empty", where);
        for (const cJSON *p = rs->child; p != r; p = p->next)
            if (strcmp(cJSON_GetObjectItemCaseSensitive(p, "workload")->valuestring, wl) == 0)
                return bad(err, cap, "%s.workload: '%.64s' appears twice", where, wl);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "timingResults");
        char tw[64];
        snprintf(tw, sizeof tw, "%s.timingResults", where);
        if (!t) return bad(err, cap, "%s: missing (an object)", tw);
        if (!check_timing(t, tw, err, cap)) return false;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, "verified");
        if (v && !cJSON_IsBool(v)) return bad(err, cap, "%s.verified: must be true or false", where);
    }
    return true;
}

static bool check_machine(const cJSON *m, char *err, size_t cap) {
    static const char *const strs[] = {"gpu", "backend", "pytorchVersion", "os", "cpu", NULL};
    static const char *const keys[] = {"gpu", "backend", "pytorchVersion", "os", "cpu", "gpuCores", NULL};
    if (!m) return bad(err, cap, "machineInfo: missing (an object)");
    if (!cJSON_IsObject(m)) return bad(err, cap, "machineInfo: must be an object");
    if (!only_keys(m, keys, "machineInfo", err, cap)) return false;
    for (size_t k = 0; strs[k]; k++)
        if (!check_str(m, strs[k], true, MAX_STR, "machineInfo", err, cap)) return false;
    if (cJSON_GetObjectItemCaseSensitive(m, "gpuCores") && !check_num(m, "gpuCores", true, "machineInfo", err, cap))
        return false;
    return true;
}

bool srv_bench_check(const cJSON *doc, char *err, size_t cap) {
    static const char *const keys[] = {"results", "machineInfo", "kernelCommitSha", "benchmarkScriptPath",
                                       "benchmarkScriptSha", NULL};
    if (!cJSON_IsObject(doc)) return bad(err, cap, "the body must be a JSON object");
    if (!only_keys(doc, keys, "body", err, cap)) return false;
    if (!check_results(cJSON_GetObjectItemCaseSensitive(doc, "results"), err, cap) ||
        !check_machine(cJSON_GetObjectItemCaseSensitive(doc, "machineInfo"), err, cap) ||
        !check_str(doc, "kernelCommitSha", true, 128, "body", err, cap) ||
        !check_str(doc, "benchmarkScriptPath", true, MAX_PATH_STR, "body", err, cap) ||
        !check_str(doc, "benchmarkScriptSha", false, 64, "body", err, cap))
        return false;
    const cJSON *sha = cJSON_GetObjectItemCaseSensitive(doc, "benchmarkScriptSha");
    if (sha) {
        size_t n = strlen(sha->valuestring);
        bool hex = n == 64;
        for (size_t i = 0; i < n && hex; i++) hex = strchr("0123456789abcdef", sha->valuestring[i]) != NULL;
        if (!hex) return bad(err, cap, "body.benchmarkScriptSha: must be 64 lowercase hex digits (a sha256)");
    }
    return true;
}

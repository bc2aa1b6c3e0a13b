/* Benchmark submissions on the mirror (docs/serve.md, "Benchmarks"):
 *   bench_schema.c     the schema of a submission (kernels 0.17.2 BenchmarkResult.to_payload)
 *   http_benchmarks.c  POST / GET /api/kernels/{repo}/benchmarks: auth, bounds, storage, listing */
#ifndef HK_SRV_BENCH_H
#define HK_SRV_BENCH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* Submissions are kept in <store>/<repo folder>/HK_BENCH_DIR/<id>.json. */
#define HK_BENCH_DIR "hubkern-benchmarks"
/* Records per GET page unless ?limit= asks for another number (1 .. HK_BENCH_PAGE_MAX). */
#define HK_BENCH_PAGE_DEFAULT 100
#define HK_BENCH_PAGE_MAX 1000

/* Does doc follow the submission schema? false: err gets what is wrong, by its JSON path. */
bool srv_bench_check(const cJSON *doc, char *err, size_t cap);

#endif

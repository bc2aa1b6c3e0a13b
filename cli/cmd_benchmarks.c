/* hubkern benchmarks: the benchmark submissions a hubkern mirror keeps for a kernel repo (what
 * `kernels benchmark --upload` posted to it), newest first. */
#include "cli/cli.h"

#include <hubkern.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "limit", 0, "N", "show at most N submissions (default 20; pages are followed)", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print the submissions (or the error) as a JSON array on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "hub options"};

const cli_spec cli_spec_benchmarks = {
    .name = "benchmarks",
    .summary = "list the benchmark results a mirror collected for a kernel",
    .synopsis = "hubkern benchmarks ORG/NAME [--limit N] [--json] [--endpoint URL]",
    .description =
        "Lists what `kernels benchmark --upload` submitted to a hubkern mirror for ORG/NAME (GET\n"
        "/api/kernels/ORG/NAME/benchmarks; see docs/serve.md, \"Benchmarks\"), newest first: when, the\n"
        "kernel build, the machine, and each workload's mean and standard deviation. With --json, the\n"
        "records as the mirror stores them. Needs the network (HF_ENDPOINT or --endpoint; HF_TOKEN when\n"
        "the mirror needs a token).\n",
    .tables = {k_opts, cli_hub_opts_online},
    .table_titles = k_titles,
    .json = 1,
};

static const char *str_at(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

static double num_at(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void print_record(const cJSON *r) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(r, "machineInfo");
    printf("%s  %s  kernel %.12s  %s, %s, %s\n", str_at(r, "createdAt"), str_at(r, "id"), str_at(r, "kernelCommitSha"),
           str_at(m, "backend"), str_at(m, "gpu"), str_at(m, "cpu"));
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r, "results"), *w;
    cJSON_ArrayForEach(w, rs) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(w, "timingResults");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(w, "verified");
        printf("    %-40s %10.4f ms  +- %.4f  (n=%.0f)%s\n", str_at(w, "workload"), num_at(t, "mean_ms"),
               num_at(t, "std_ms"), num_at(t, "iterations"),
               cJSON_IsTrue(v) ? "  verified" : cJSON_IsFalse(v) ? "  NOT verified" : "");
    }
}

int cli_cmd_benchmarks(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_benchmarks, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_benchmarks);
        cli_args_free(&a);
        return rc;
    }
    cli_hub_args h;
    cli_hub_args_get(&h, &a);
    int limit = 20;
    char rbuf[256];
    const char *repo = a.npos ? cli_repo_arg(rbuf, sizeof rbuf, a.pos[0]) : NULL;
    if ((rc = cli_int(&a, "limit", 1000000, &limit))) goto out;
    if (limit < 0) limit = 20;
    if (limit == 0) rc = cli_usage_error("--limit: at least 1");
    else if (!repo) rc = cli_usage_error("missing ORG/NAME (the kernel repo)");
    else if (a.npos > 1) rc = cli_usage_error("unexpected argument '%s'", a.pos[1]);
    if (rc) goto out;
    hk_hub *hub = NULL;
    if (cli_hub_open(&hub, &h, NULL, NULL)) {
        rc = cli_report_error(NULL);
        goto out;
    }
    cJSON *all = cJSON_CreateArray();
    char *cursor = NULL;
    int shown = 0;
    do {
        char *page = NULL, *next = NULL;
        unsigned want = (unsigned)(limit - shown > 1000 ? 1000 : limit - shown);
        if (hk_hub_list_benchmarks(&page, &next, hub, repo, want, cursor) != HK_OK) {
            rc = cli_report_error(repo);
            hk_free(page);
            break;
        }
        hk_free(cursor);
        cursor = next;
        cJSON *arr = cJSON_Parse(page);
        hk_free(page);
        if (!cJSON_IsArray(arr)) {
            cJSON_Delete(arr);
            rc = cli_fail(1, "HK_ERR_PROTOCOL", "%s: the mirror's benchmark listing is not a JSON array", repo);
            break;
        }
        while (arr->child && shown < limit) {
            cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(arr, arr->child));
            shown++;
        }
        cJSON_Delete(arr);
    } while (cursor && shown < limit);
    hk_free(cursor);
    if (rc == 0) {
        if (cli_json()) { /* the envelope is an object: the records go under "benchmarks" */
            cJSON *doc = cJSON_CreateObject();
            cJSON_AddStringToObject(doc, "repo_id", repo);
            cJSON_AddItemToObject(doc, "benchmarks", all);
            all = NULL;
            cli_print_json(doc);
        } else if (!shown) {
            fprintf(stderr, "%s: no benchmark submissions on %s\n", repo, hk_hub_endpoint(hub));
        } else {
            const cJSON *r;
            cJSON_ArrayForEach(r, all) print_record(r);
        }
    }
    cJSON_Delete(all);
    hk_hub_free(hub);
out:
    cli_args_free(&a);
    return rc;
}

/* hubkern serve: run a Hub-compatible mirror over a cache directory. */
#include "cli/cli.h"
#include "util/vec.h"

#include "internal.h"
#include "server/server.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece: a command's main reads its options in the order of its spec into one config and hands
 * it to the library; split, each part would take the parsed arguments and the config being filled. */
int cli_cmd_serve(int argc, char **argv);

#ifdef HK_HAVE_SERVER
#define HK_STR2(x) #x
#define HK_STR(x) HK_STR2(x)

static const cli_opt k_opts[] = {
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "the store (default: the hub cache, as HF_HUB_CACHE/HF_HOME resolve it)", "cache", NULL},
    {HK_OPT_VALUE, "host", 0, "ADDR", "address to bind (default 127.0.0.1; 0.0.0.0 or :: for every interface)", NULL, NULL},
    {HK_OPT_VALUE, "port", 0, "N", "TCP port (default 8080; 0 picks a free port, printed on stdout)", NULL, NULL},
    {HK_OPT_VALUE, "threads", 0, "N", "worker threads (default 4)", NULL, NULL},
    {HK_OPT_VALUE, "max-connections", 0, "N", "simultaneous connections (default 1024)", NULL, NULL},
    {HK_OPT_VALUE, "max-connections-per-ip", 0, "N", "simultaneous connections from one client address (default: no "
     "limit, as every client behind a reverse proxy has the proxy's address); behind a --trusted-proxy, the "
     "requests in flight of one forwarded client address", NULL, NULL},
    {HK_OPT_LIST, "trusted-proxy", 0, "ADDR[/PREFIX]", "a reverse proxy whose X-Forwarded-For (else Forwarded) names "
     "the client (repeatable): on its connections the client is the right-most forwarded address that is not a "
     "trusted proxy, for the access log, --max-connections-per-ip and --client-miss-budget. Forwarding headers from "
     "anyone else are ignored", NULL, NULL},
    {HK_OPT_VALUE, "header-timeout", 0, "SECONDS", "deadline for a request's headers, from accept or the end of the "
     "previous answer (default " HK_STR(HK_SERVE_HEADER_TIMEOUT_DEFAULT) "; against slowloris)", NULL, NULL},
    {HK_OPT_VALUE, "page-size", 0, "N", "entries per tree-listing page; more pages follow a Link rel=\"next\" header "
     "(default " HK_STR(HK_TREE_PAGE_SIZE_DEFAULT) " with --public-url; without it " HK_STR(HK_SERVE_UNPAGED_MAX)
     ", since its links are relative and huggingface_hub cannot follow those)", NULL, NULL},
    {HK_OPT_VALUE, "public-url", 0, "URL", "base URL written into Link headers and redirects (e.g. a reverse proxy's "
     "https URL). Without it they are relative, never built from the request's Host header; huggingface_hub "
     "needs it to follow a tree listing past one page", NULL, NULL},
    {HK_OPT_LIST, "token", 0, "SPEC", "require `Authorization: Bearer <token>` (repeatable): TOKEN (every repo) or "
     "TOKEN:org1,org2/name (only those namespaces or repos; others get 403); read-only unless followed by :write "
     "(TOKEN::write, TOKEN:org1:write), which also allows benchmark uploads. No token: 401 (clients report the repo as not found); "
     "an unknown one: 401 \"Invalid credentials in Authorization header\"", NULL, NULL},
    {HK_OPT_LIST, "token-file", 0, "FILE", "read token specs from FILE, one per line ('#' starts a comment)", NULL, NULL},
    {HK_OPT_LIST, "trust", 0, "ORG", "answer /api/organizations/ORG/overview with trustedKernelPublisher: true "
     "(repeatable; '*' trusts every namespace in the store); others present answer false, unknown ones 404", NULL, NULL},
    {HK_OPT_VALUE, "lfs-threshold", 0, "BYTES", "blobs not named by an etag are hashed on first use: binary files or "
     "files this large are served as LFS files (sha256 etag), others by git blob sha1", NULL, NULL},
    {HK_OPT_FLAG, "lfs-302", 0, NULL, "answer resolves of LFS files with a 302 to a signed /lfs/ URL on this mirror, "
     "carrying X-Repo-Commit / X-Linked-Etag / X-Linked-Size on the 302 as the Hub does with its CDN", NULL, NULL},
    {HK_OPT_LIST, "upstream", 0, "URL", "pull-through: fetch what the store lacks from URL (another hubkern mirror or "
     "the Hub), verify it and keep it; repeatable (fallbacks, in order)", NULL, NULL},
    {HK_OPT_VALUE, "upstream-token-file", 0, "FILE", "token sent to the upstreams' own origins only (else "
     "HUBKERN_UPSTREAM_TOKEN)", NULL, NULL},
    {HK_OPT_VALUE, "upstream-timeout", 0, "SECONDS", "give up an upstream that sends nothing for this long (default "
     HK_STR(HK_SERVE_UPSTREAM_TIMEOUT_DEFAULT) "; connecting: at most 10 s); the next --upstream is tried, else 503",
     NULL, NULL},
    {HK_OPT_VALUE, "upstream-deadline", 0, "SECONDS", "give up an upstream transfer, and a wait for another request's, "
     "still running after this long at under 64 KiB/s on average (default " HK_STR(HK_SERVE_UPSTREAM_DEADLINE_DEFAULT)
     "): 503 with Retry-After", NULL, NULL},
    {HK_OPT_VALUE, "upstream-max-backoff", 0, "SECONDS", "most of an upstream 429's Retry-After honoured (default "
     HK_STR(HK_SERVE_MAX_BACKOFF_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "upstream-retry-after", 0, "SECONDS", "the Retry-After of the 503 a client gets when its upstream "
     "step cannot be done now: the upstream unavailable, a transfer or a wait given up (default "
     HK_STR(HK_SERVE_UPSTREAM_RETRY_AFTER_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "upstream-transfers", 0, "N", "threads that run upstream misses while their connections wait "
     "suspended (default " HK_STR(HK_SERVE_UPSTREAM_TRANSFERS_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "upstream-queue", 0, "N", "distinct upstream misses in flight at once, running or waiting for a "
     "transfer thread; one more gets 503 with Retry-After (default " HK_STR(HK_SERVE_UPSTREAM_QUEUE_DEFAULT) ")",
     NULL, NULL},
    {HK_OPT_VALUE, "upstream-memo-bytes", 0, "BYTES", "memory for passed-through refs and overview answers, least "
     "recently used dropped first (default 67108864)", NULL, NULL},
    {HK_OPT_VALUE, "client-miss-budget", 0, "N", "upstream misses one client (its token with --token, else its "
     "address) may cause per --client-miss-window; more get 429 with Retry-After (default "
     HK_STR(HK_SERVE_CLIENT_MISSES_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "client-miss-window", 0, "SECONDS", "the window of --client-miss-budget (default "
     HK_STR(HK_SERVE_CLIENT_WINDOW_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "revision-ttl", 0, "SECONDS", "how long a branch/tag -> commit answer from upstream is used (default "
     HK_STR(HK_SERVE_REVISION_TTL_DEFAULT) "); also the max-age of branch-addressed answers", NULL, NULL},
    {HK_OPT_VALUE, "negative-ttl", 0, "SECONDS", "how long an upstream 404/410 is remembered (default "
     HK_STR(HK_SERVE_NEGATIVE_TTL_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "benchmark-max-bytes", 0, "BYTES", "largest benchmark submission accepted by POST "
     "/api/kernels/ORG/NAME/benchmarks (default " HK_STR(HK_SERVE_BENCHMARK_MAX_DEFAULT) "; uploads need a "
     "--token ...:write)", NULL, NULL},
    {HK_OPT_VALUE, "benchmark-quota-count", 0, "N", "benchmark submissions kept per repo; a new one evicts the "
     "oldest past it (default " HK_STR(HK_SERVE_BENCHMARK_QUOTA_COUNT_DEFAULT) ")", NULL, NULL},
    {HK_OPT_VALUE, "benchmark-quota-bytes", 0, "BYTES", "bytes of benchmark submissions kept per repo; a new one "
     "evicts the oldest past it (default " HK_STR(HK_SERVE_BENCHMARK_QUOTA_BYTES_DEFAULT) ", at least "
     "--benchmark-max-bytes)", NULL, NULL},
    {HK_OPT_FLAG, "json", 0, NULL, "print where it listens (or the error) as one JSON object on stdout", NULL, NULL},
    {HK_OPT_FLAG, "access-log", 0, NULL, "log one line per request (client, request, status, bytes, time, and "
     "hit/miss/coalesced/stale with --upstream) to stderr", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

#ifdef HK_TEST_HOOKS
/* test hooks: this build has HK_TEST_HOOKS; product builds have none of these */
static const cli_opt k_hooks[] = {
    {HK_OPT_VALUE, "fault-cut-after", 0, "BYTES", "close the connection after BYTES bytes of the first GET responses "
     "longer than that, to exercise clients' resume (default off)", NULL, NULL},
    {HK_OPT_VALUE, "fault-cut-count", 0, "N", "how many responses --fault-cut-after cuts (default 1)", NULL, NULL},
    {HK_OPT_VALUE, "racy-window-ms", 0, "MS", "a file changed less than MS ms before it is read is not kept in an "
     "answer (default 2000; shorter for tests that wait it out)", NULL, NULL},
    {HK_OPT_VALUE, "listing-ttl-ms", 0, "MS", "how long requests share one listing of a commit (default 5000)", NULL,
     NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
static const char *const k_titles[] = {"options", "test hooks (HK_TEST_HOOKS builds only)"};
#endif

const cli_spec cli_spec_serve = {
    .name = "serve",
    .summary = "run a Hub-compatible mirror over a store",
    .synopsis = "hubkern serve [--cache-dir DIR] [--host ADDR] [--port N] [options]",
    .description =
        "Serve a huggingface_hub-layout cache directory (filled by `hubkern publish`, `hubkern pull` or\n"
        "Python) over the Hub's HTTP protocol, so that clients with HF_ENDPOINT=http://ADDR:PORT download\n"
        "from it: huggingface_hub, kernels, hubkern. The first line on stdout is\n"
        "`listening on http://ADDR:PORT` (with --json, one JSON object with \"url\" and \"port\", printed\n"
        "once the server listens). SIGINT or SIGTERM stops the server cleanly.\n",
#ifdef HK_TEST_HOOKS
    .tables = {k_opts, k_hooks},
    .table_titles = k_titles,
#else
    .tables = {k_opts},
#endif
    .json = 1,
};

/* An integer option in [lo, hi]; otherwise a usage error naming the option and the range. */
static int parse_num(uint64_t *out, const char *s, const char *what, uint64_t lo, uint64_t hi) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
        if (hi == UINT64_MAX) cli_usage_error("%s takes an integer of at least %llu, got '%s'", what, (unsigned long long)lo, s);
        else cli_usage_error("%s takes an integer from %llu to %llu, got '%s'", what, (unsigned long long)lo,
                             (unsigned long long)hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static int sv_push(strvec *sv, const char *s) {
    if (HK_VEC_RESERVE(sv->v, sv->cap, sv->n + 1) != HK_OK) return -1;
    if (!(sv->v[sv->n] = hk__strdup(s))) return -1;
    sv->n++;
    return 0;
}

static void sv_free(strvec *sv) {
    for (size_t i = 0; i < sv->n; i++) free(sv->v[i]);
    free(sv->v);
}

static int read_token_file(strvec *sv, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_fail(1, "HK_ERR_IO", "cannot read token file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = strcspn(s, "#\r\n");
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        s[n] = '\0';
        if (n && sv_push(sv, s) != 0) {
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    return 0;
}

int cli_cmd_serve(int argc, char **argv) {
    srv_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 8080;
    const char *cache = NULL;
    strvec tokens = {0}, trusted = {0}, upstreams = {0}, up_token = {0}, proxies = {0};
    cli_args a = {0};
    int verbose = 0, rc = 2;
    uint64_t v;
    if ((rc = cli_parse(&a, &cli_spec_serve, argc, argv)) || a.help) {
        if (!rc) cli_print_help(&cli_spec_serve);
        goto out;
    }
    rc = 2;
    for (size_t i = 0; i < a.nocc; i++) {
        const char *n = a.occ[i].opt->name, *optarg = a.occ[i].value;
        if (!strcmp(n, "cache-dir")) cache = optarg;
        else if (!strcmp(n, "host")) cfg.host = optarg;
        else if (!strcmp(n, "port")) {
            if (parse_num(&v, optarg, "--port", 0, 65535)) goto usage;
            cfg.port = (unsigned)v;
        } else if (!strcmp(n, "threads")) {
            if (parse_num(&v, optarg, "--threads", 1, 1024)) goto usage;
            cfg.threads = (unsigned)v;
        } else if (!strcmp(n, "max-connections")) {
            if (parse_num(&v, optarg, "--max-connections", 1, 1000000)) goto usage;
            cfg.max_connections = (unsigned)v;
        } else if (!strcmp(n, "page-size")) {
            if (parse_num(&v, optarg, "--page-size", 1, 100000)) goto usage;
            cfg.page_size = (unsigned)v;
        } else if (!strcmp(n, "public-url")) cfg.public_url = optarg;
        else if (!strcmp(n, "token")) {
            if (sv_push(&tokens, optarg)) goto oom;
        } else if (!strcmp(n, "token-file")) {
            if (read_token_file(&tokens, optarg)) goto fail;
        } else if (!strcmp(n, "trust")) {
            if (sv_push(&trusted, optarg)) goto oom;
        } else if (!strcmp(n, "trusted-proxy")) {
            if (sv_push(&proxies, optarg)) goto oom;
        } else if (!strcmp(n, "lfs-threshold")) {
            if (parse_num(&v, optarg, "--lfs-threshold", 1, UINT64_MAX)) goto usage;
            cfg.lfs_threshold = v;
        } else if (!strcmp(n, "lfs-302")) cfg.lfs_302 = true;
        else if (!strcmp(n, "access-log")) cfg.access_log = true;
        else if (!strcmp(n, "max-connections-per-ip")) {
            if (parse_num(&v, optarg, "--max-connections-per-ip", 1, 1000000)) goto usage;
            cfg.max_connections_per_ip = (unsigned)v;
        } else if (!strcmp(n, "header-timeout")) {
            if (parse_num(&v, optarg, "--header-timeout", 1, 86400)) goto usage;
            cfg.header_timeout = (unsigned)v;
        } else if (!strcmp(n, "upstream")) {
            if (sv_push(&upstreams, optarg)) goto oom;
        } else if (!strcmp(n, "upstream-token-file")) {
            /* the first non-comment line of the file; never echoed */
            if (read_token_file(&up_token, optarg)) goto fail;
        } else if (!strcmp(n, "upstream-timeout")) {
            if (parse_num(&v, optarg, "--upstream-timeout", 1, 3600)) goto usage;
            cfg.upstream_timeout = (unsigned)v;
        } else if (!strcmp(n, "upstream-deadline")) {
            if (parse_num(&v, optarg, "--upstream-deadline", 1, 86400)) goto usage;
            cfg.upstream_deadline = (unsigned)v;
        } else if (!strcmp(n, "upstream-max-backoff")) {
            if (parse_num(&v, optarg, "--upstream-max-backoff", 1, 3600)) goto usage;
            cfg.upstream_max_backoff = (unsigned)v;
        } else if (!strcmp(n, "upstream-retry-after")) {
            if (parse_num(&v, optarg, "--upstream-retry-after", 1, 3600)) goto usage;
            cfg.upstream_retry_after = (unsigned)v;
        } else if (!strcmp(n, "upstream-transfers")) {
            if (parse_num(&v, optarg, "--upstream-transfers", 1, 256)) goto usage;
            cfg.upstream_transfers = (unsigned)v;
        } else if (!strcmp(n, "upstream-queue")) {
            if (parse_num(&v, optarg, "--upstream-queue", 1, 65536)) goto usage;
            cfg.upstream_queue = (unsigned)v;
        } else if (!strcmp(n, "upstream-memo-bytes")) {
            if (parse_num(&v, optarg, "--upstream-memo-bytes", 1, 16ull << 30)) goto usage;
            cfg.upstream_memo_bytes = v;
        } else if (!strcmp(n, "client-miss-budget")) {
            if (parse_num(&v, optarg, "--client-miss-budget", 1, 1000000)) goto usage;
            cfg.client_miss_budget = (unsigned)v;
        } else if (!strcmp(n, "client-miss-window")) {
            if (parse_num(&v, optarg, "--client-miss-window", 1, 86400)) goto usage;
            cfg.client_miss_window = (unsigned)v;
        } else if (!strcmp(n, "revision-ttl")) {
            if (parse_num(&v, optarg, "--revision-ttl", 1, 86400 * 365)) goto usage;
            cfg.revision_ttl = (unsigned)v;
        } else if (!strcmp(n, "benchmark-max-bytes")) {
            if (parse_num(&v, optarg, "--benchmark-max-bytes", 1, HK_SERVE_BENCHMARK_MAX_LIMIT)) goto usage;
            cfg.benchmark_max_bytes = v;
        } else if (!strcmp(n, "benchmark-quota-count")) {
            if (parse_num(&v, optarg, "--benchmark-quota-count", 1, 10000000)) goto usage;
            cfg.benchmark_quota_count = v;
        } else if (!strcmp(n, "benchmark-quota-bytes")) {
            if (parse_num(&v, optarg, "--benchmark-quota-bytes", 1, UINT64_MAX)) goto usage;
            cfg.benchmark_quota_bytes = v;
        } else if (!strcmp(n, "negative-ttl")) {
            if (parse_num(&v, optarg, "--negative-ttl", 1, 86400)) goto usage;
            cfg.negative_ttl = (unsigned)v;
        }
#ifdef HK_TEST_HOOKS
        else if (!strcmp(n, "fault-cut-after")) {
            if (parse_num(&v, optarg, "--fault-cut-after", 0, UINT64_MAX)) goto usage;
            cfg.fault_cut_after = v;
        } else if (!strcmp(n, "fault-cut-count")) {
            if (parse_num(&v, optarg, "--fault-cut-count", 0, 1000000)) goto usage;
            cfg.fault_cut_count = (unsigned)v;
        } else if (!strcmp(n, "racy-window-ms")) {
            if (parse_num(&v, optarg, "--racy-window-ms", 1, 60000)) goto usage;
            cfg.racy_window_ms = (unsigned)v;
        } else if (!strcmp(n, "listing-ttl-ms")) {
            if (parse_num(&v, optarg, "--listing-ttl-ms", 1, 600000)) goto usage;
            cfg.listing_ttl_ms = (unsigned)v;
        }
#endif
    }
    verbose = cli_count(&a, "verbose");
    if (a.npos) {
        cli_usage_error("unexpected argument '%s'", a.pos[0]);
        goto usage;
    }
    {
        int lvl = verbose;
        if (cfg.access_log && lvl < 1) lvl = 1;
        cli_set_verbosity(lvl, 0); /* HUBKERN_VERBOSE may raise it */
    }
    char *root = NULL;
    if (hk_cache_root(&root, cache, HK_REPO_MODEL) != HK_OK) {
        rc = cli_report_error(NULL); /* the prefix already says serve */
        goto out;
    }
    cfg.cache_dir = root;
    cfg.tokens = (const char *const *)tokens.v;
    cfg.n_tokens = tokens.n;
    cfg.trusted_orgs = (const char *const *)trusted.v;
    cfg.n_trusted_orgs = trusted.n;
    cfg.trusted_proxies = (const char *const *)proxies.v;
    cfg.n_trusted_proxies = proxies.n;
    cfg.upstreams = (const char *const *)upstreams.v;
    cfg.n_upstreams = upstreams.n;
    cfg.upstream_token = up_token.n ? up_token.v[0] : getenv("HUBKERN_UPSTREAM_TOKEN");

    /* Block the stop signals in every thread (the workers inherit the mask), then wait for them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv_server *srv = NULL;
    if (srv_start(&srv, &cfg) != HK_OK) {
        free(root);
        rc = cli_report_error(NULL); /* the prefix already says serve */
        goto out;
    }
    const char *host = cfg.host;
    char url[300];
    snprintf(url, sizeof url, strchr(host, ':') ? "http://[%s]:%u" : "http://%s:%u", host, srv_port(srv));
    if (cli_json()) { /* the one document, printed once the mirror listens (docs/json.md) */
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "url", url);
        cJSON_AddStringToObject(j, "host", host);
        cJSON_AddNumberToObject(j, "port", srv_port(srv));
        cJSON_AddStringToObject(j, "cache", root);
        cli_print_json(j);
    } else {
        printf("listening on %s\n", url);
    }
    fflush(stdout);
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    hk__log(HK_LOG_INFO, "signal %d: stopping", sig);
    srv_stop(srv);
    free(root);
    fprintf(stderr, "hubkern serve: stopped\n");
    rc = 0;
    goto out;
oom:
    cli_fail(1, "HK_ERR_NOMEM", "out of memory");
fail:
    rc = 1;
    goto out;
usage: /* the message and "try 'hubkern serve --help'" are printed */
    rc = 2;
out:
    cli_args_free(&a);
    sv_free(&tokens);
    sv_free(&trusted);
    sv_free(&upstreams);
    sv_free(&up_token);
    sv_free(&proxies);
    return rc;
}

#else
const cli_spec cli_spec_serve = {.name = "serve", .summary = "run a Hub-compatible mirror (not in this build)",
                                   .synopsis = "hubkern serve [options]"};
int cli_cmd_serve(int argc, char **argv) {
    fprintf(stderr, "hubkern serve: this hubkern was built without the server (HK_BUILD_SERVER=OFF)\n");
    return 1;
}
#endif

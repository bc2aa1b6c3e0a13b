/* hubkern serve: run a Hub-compatible mirror over a cache directory. */
#include "cli/cli.h"

#include "internal.h"
#include "server/server.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int hk_cmd_serve(int argc, char **argv);

#ifdef HK_HAVE_SERVER
static void serve_usage(FILE *f) {
    fprintf(f,
            "usage: hubkern serve [--cache DIR] [--host ADDR] [--port N] [options]\n"
            "\n"
            "Serve a huggingface_hub-layout cache directory (filled by `hubkern publish`, `hubkern pull` or\n"
            "Python) over the Hub's HTTP protocol, so that clients with HF_ENDPOINT=http://ADDR:PORT download\n"
            "from it: huggingface_hub, kernels, hubkern. The first line on stdout is\n"
            "`listening on http://ADDR:PORT`. SIGINT or SIGTERM stops the server cleanly.\n"
            "\n"
            "options:\n"
            "  --cache DIR            the store (default: the hub cache, as HF_HUB_CACHE/HF_HOME resolve it)\n"
            "  --host ADDR            address to bind (default 127.0.0.1; 0.0.0.0 or :: for every interface)\n"
            "  --port N               TCP port (default 8080; 0 picks a free port, printed on stdout)\n"
            "  --threads N            worker threads (default 4)\n"
            "  --max-connections N    simultaneous connections (default 1024)\n"
            "  --max-connections-per-ip N\n"
            "                         simultaneous connections from one client address (default %u)\n"
            "  --header-timeout SECONDS\n"
            "                         deadline for receiving a request's headers, from accept or from the end\n"
            "                         of the previous answer on a keep-alive connection (default %u); against\n"
            "                         clients that drip their headers (slowloris)\n"
            "  --page-size N          entries per tree-listing page; more pages follow a Link rel=\"next\"\n"
            "                         header (default %u)\n"
            "  --public-url URL       base URL written into Link headers and redirects (e.g. the https URL of\n"
            "                         a reverse proxy in front of the mirror; default: http://<Host header>)\n"
            "  --token SPEC           require `Authorization: Bearer <token>` (repeatable). SPEC is TOKEN\n"
            "                         (every repo) or TOKEN:org1,org2 (only those namespaces; others get 403).\n"
            "                         No token is sent: 401 (clients report the repo as not found); an unknown\n"
            "                         token: 401 \"Invalid credentials in Authorization header\"\n"
            "  --token-file FILE      read token specs from FILE, one per line ('#' starts a comment)\n"
            "  --trust ORG            answer /api/organizations/ORG/overview with trustedKernelPublisher: true\n"
            "                         (repeatable; '*' trusts every namespace in the store). Namespaces present\n"
            "                         but not trusted answer false; unknown ones 404\n"
            "  --lfs-threshold BYTES  blobs not named by an etag (caches written without symlinks) are hashed\n"
            "                         on first use: binary files or files this large are served as LFS files\n"
            "                         (sha256 etag), others by git blob sha1 (default %llu)\n"
            "  --lfs-302              answer resolves of LFS files with a 302 to a signed /lfs/ URL on this\n"
            "                         mirror, carrying X-Repo-Commit / X-Linked-Etag / X-Linked-Size on the 302\n"
            "                         as the Hub does with its CDN (default: a direct 200)\n"
            "  --upstream URL         pull-through: fetch what the store lacks from URL (another hubkern mirror\n"
            "                         or the Hub), verify it and keep it; repeatable (fallbacks, in order)\n"
            "  --upstream-token-file FILE\n"
            "                         token sent to the upstreams' own origins only (else HUBKERN_UPSTREAM_TOKEN)\n"
            "  --revision-ttl SECONDS how long a branch/tag -> commit answer from upstream is used (default %u);\n"
            "                         also the max-age of branch-addressed answers\n"
            "  --negative-ttl SECONDS how long an upstream 404/410 is remembered (default %u)\n"
            "  --access-log           log one line per request (client, request, status, bytes, time, and\n"
            "                         hit/miss/coalesced/stale with --upstream) to stderr\n"
            "  -v, --verbose          more log output (repeat for debug)\n"
            "  -h, --help             this text\n",
            HK_SERVE_PER_IP_DEFAULT, HK_SERVE_HEADER_TIMEOUT_DEFAULT, HK_TREE_PAGE_SIZE_DEFAULT,
            (unsigned long long)HK_LFS_THRESHOLD_DEFAULT, HK_SERVE_REVISION_TTL_DEFAULT, HK_SERVE_NEGATIVE_TTL_DEFAULT);
#ifdef HK_TEST_HOOKS
    fprintf(f,
            "\n"
            "test hooks (this build has HK_TEST_HOOKS; product builds have none of these):\n"
            "  --fault-cut-after BYTES  close the connection after BYTES bytes of the first GET responses\n"
            "                         longer than that, to exercise clients' resume (default off)\n"
            "  --fault-cut-count N    how many responses --fault-cut-after cuts (default 1)\n");
#endif
}

static int parse_u64(uint64_t *out, const char *s, const char *what) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "hubkern serve: %s expects a non-negative integer, got '%s'\n", what, s);
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
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 8;
        char **nv = realloc(sv->v, cap * sizeof *nv);
        if (!nv) return -1;
        sv->v = nv;
        sv->cap = cap;
    }
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
        fprintf(stderr, "hubkern serve: cannot read token file %s: %s\n", path, strerror(errno));
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

int hk_cmd_serve(int argc, char **argv) {
    enum { O_CACHE = 1000, O_HOST, O_PORT, O_THREADS, O_MAXC, O_PAGE, O_PUBLIC, O_TOKEN, O_TOKEN_FILE, O_TRUST,
           O_LFS_T, O_LFS_302, O_ACCESS, O_PER_IP, O_HEADER_T, O_CUT, O_CUT_N, O_UP, O_UP_TOKEN, O_REV_TTL,
           O_NEG_TTL };
    static const struct option opts[] = {
        {"cache", required_argument, NULL, O_CACHE},
        {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, O_PORT},
        {"threads", required_argument, NULL, O_THREADS},
        {"max-connections", required_argument, NULL, O_MAXC},
        {"page-size", required_argument, NULL, O_PAGE},
        {"public-url", required_argument, NULL, O_PUBLIC},
        {"token", required_argument, NULL, O_TOKEN},
        {"token-file", required_argument, NULL, O_TOKEN_FILE},
        {"trust", required_argument, NULL, O_TRUST},
        {"lfs-threshold", required_argument, NULL, O_LFS_T},
        {"lfs-302", no_argument, NULL, O_LFS_302},
        {"access-log", no_argument, NULL, O_ACCESS},
        {"max-connections-per-ip", required_argument, NULL, O_PER_IP},
        {"header-timeout", required_argument, NULL, O_HEADER_T},
        {"upstream", required_argument, NULL, O_UP},
        {"upstream-token-file", required_argument, NULL, O_UP_TOKEN},
        {"revision-ttl", required_argument, NULL, O_REV_TTL},
        {"negative-ttl", required_argument, NULL, O_NEG_TTL},
#ifdef HK_TEST_HOOKS
        {"fault-cut-after", required_argument, NULL, O_CUT},
        {"fault-cut-count", required_argument, NULL, O_CUT_N},
#endif
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    hk_serve_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 8080;
    const char *cache = NULL;
    strvec tokens = {0}, trusted = {0}, upstreams = {0}, up_token = {0};
    int verbose = 0, rc = 2;
    uint64_t v;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
        switch (c) {
        case O_CACHE: cache = optarg; break;
        case O_HOST: cfg.host = optarg; break;
        case O_PORT:
            if (parse_u64(&v, optarg, "--port")) goto usage;
            if (v > 65535) {
                fprintf(stderr, "hubkern serve: --port must be at most 65535\n");
                goto usage;
            }
            cfg.port = (unsigned)v;
            break;
        case O_THREADS:
            if (parse_u64(&v, optarg, "--threads") || v == 0 || v > 1024) goto usage;
            cfg.threads = (unsigned)v;
            break;
        case O_MAXC:
            if (parse_u64(&v, optarg, "--max-connections") || v == 0 || v > 1000000) goto usage;
            cfg.max_connections = (unsigned)v;
            break;
        case O_PAGE:
            if (parse_u64(&v, optarg, "--page-size") || v == 0 || v > 100000) goto usage;
            cfg.page_size = (unsigned)v;
            break;
        case O_PUBLIC: cfg.public_url = optarg; break;
        case O_TOKEN:
            if (sv_push(&tokens, optarg)) goto oom;
            break;
        case O_TOKEN_FILE:
            if (read_token_file(&tokens, optarg)) goto fail;
            break;
        case O_TRUST:
            if (sv_push(&trusted, optarg)) goto oom;
            break;
        case O_LFS_T:
            if (parse_u64(&v, optarg, "--lfs-threshold") || v == 0) goto usage;
            cfg.lfs_threshold = v;
            break;
        case O_LFS_302: cfg.lfs_302 = true; break;
        case O_ACCESS: cfg.access_log = true; break;
        case O_PER_IP:
            if (parse_u64(&v, optarg, "--max-connections-per-ip") || v == 0 || v > 1000000) goto usage;
            cfg.max_connections_per_ip = (unsigned)v;
            break;
        case O_HEADER_T:
            if (parse_u64(&v, optarg, "--header-timeout") || v == 0 || v > 86400) goto usage;
            cfg.header_timeout = (unsigned)v;
            break;
#ifdef HK_TEST_HOOKS
        case O_CUT:
            if (parse_u64(&v, optarg, "--fault-cut-after")) goto usage;
            cfg.fault_cut_after = v;
            break;
        case O_CUT_N:
            if (parse_u64(&v, optarg, "--fault-cut-count") || v > 1000000) goto usage;
            cfg.fault_cut_count = (unsigned)v;
            break;
#endif
        case O_UP:
            if (sv_push(&upstreams, optarg)) goto oom;
            break;
        case O_UP_TOKEN:
            /* the first non-comment line of the file; never echoed */
            if (read_token_file(&up_token, optarg)) goto fail;
            break;
        case O_REV_TTL:
            if (parse_u64(&v, optarg, "--revision-ttl") || v == 0 || v > 86400 * 365) goto usage;
            cfg.revision_ttl = (unsigned)v;
            break;
        case O_NEG_TTL:
            if (parse_u64(&v, optarg, "--negative-ttl") || v == 0 || v > 86400) goto usage;
            cfg.negative_ttl = (unsigned)v;
            break;
        case 'v': verbose++; break;
        case 'h':
            serve_usage(stdout);
            rc = 0;
            goto out;
        default: goto usage;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hubkern serve: unexpected argument '%s'\n", argv[optind]);
        goto usage;
    }
    {
        int lvl = verbose;
        if (cfg.access_log && lvl < 1) lvl = 1;
        const char *env = getenv("HUBKERN_VERBOSE");
        if (env && atoi(env) > lvl) lvl = atoi(env);
        hk_cli_install_logger(lvl);
    }
    char *root = NULL;
    if (hk_cache_root(&root, cache, HK_REPO_MODEL) != HK_OK) {
        rc = hk_cli_report_error("serve");
        goto out;
    }
    cfg.cache_dir = root;
    cfg.tokens = (const char *const *)tokens.v;
    cfg.n_tokens = tokens.n;
    cfg.trusted_orgs = (const char *const *)trusted.v;
    cfg.n_trusted_orgs = trusted.n;
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

    hk_server *srv = NULL;
    if (hk_server_start(&srv, &cfg) != HK_OK) {
        free(root);
        rc = hk_cli_report_error("serve");
        goto out;
    }
    const char *host = cfg.host;
    if (strchr(host, ':')) printf("listening on http://[%s]:%u\n", host, hk_server_port(srv));
    else printf("listening on http://%s:%u\n", host, hk_server_port(srv));
    fflush(stdout);
    int sig = 0;
    while (sigwait(&stop, &sig) != 0) {
    }
    hk__log(HK_LOG_INFO, "signal %d: stopping", sig);
    hk_server_stop(srv);
    free(root);
    fprintf(stderr, "hubkern serve: stopped\n");
    rc = 0;
    goto out;
oom:
    fprintf(stderr, "hubkern serve: out of memory\n");
fail:
    rc = 1;
    goto out;
usage:
    fprintf(stderr, "see 'hubkern serve --help'\n");
    rc = 2;
out:
    sv_free(&tokens);
    sv_free(&trusted);
    sv_free(&upstreams);
    sv_free(&up_token);
    return rc;
}

#else
int hk_cmd_serve(int argc, char **argv) {
    fprintf(stderr, "hubkern serve: this hubkern was built without the server (HK_BUILD_SERVER=OFF)\n");
    return 1;
}
#endif

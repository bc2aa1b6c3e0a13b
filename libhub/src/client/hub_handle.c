/* The Hub client handle: options (versioned), the pull spec's defaults, the token, User-Agent,
 * timeouts and listing bounds from options and the environment; accessors. */
#include "client/memo.h"
#include "client/signature.h"
#include "cache/cache_internal.h"
#include "client/client.h"
#include "client/pull_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

int hk_hub_options_init(hk_hub_options *o, unsigned int version) {
    HK__OPTIONS_INIT_SIZED(hk_hub_options, o, version, HK_HUB_OPTIONS_VERSION,
                           version >= 4   ? sizeof(hk_hub_options)
                           : version >= 3 ? offsetof(hk_hub_options, share)
                           : version >= 2 ? offsetof(hk_hub_options, freshness_s)
                                          : offsetof(hk_hub_options, request_timeout_s),
                           HK_HUB_OPTIONS_INIT);
}

int hk_pull_spec_init(hk_pull_spec *s, unsigned int version) {
    HK__OPTIONS_INIT_SIZED(hk_pull_spec, s, version, HK_PULL_SPEC_VERSION, hk__pull_spec_size(version),
                           HK_PULL_SPEC_INIT);
}

/* A positive integer from the environment (name), else the option (opt > 0), else def. */
static uint64_t env_bound(const char *name, uint64_t opt, uint64_t def) {
    if (opt > 0) return opt;
    const char *v = hk__getenv(name);
    if (v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (end != v && *end == '\0' && n > 0 && v[0] != '-') return (uint64_t)n;
        hk__log(HK_LOG_WARN, "ignoring %s=%s (not a positive integer)", name, v);
    }
    return def;
}

static long env_timeout_ms(const char *name, double opt_s) {
    const char *v = hk__getenv(name);
    if (v) {
        char *end;
        double d = strtod(v, &end);
        if (end != v && d > 0) return (long)(d * 1000.0 + 0.5);
    }
    if (opt_s > 0) return (long)(opt_s * 1000.0 + 0.5);
    return 10000;
}

/* A deadline in ms: the option when non-zero (< 0: none), else the variable (seconds; 0: none),
 * else def_ms (0: none). */
static long deadline_ms(const char *name, double opt_s, long def_ms) {
    if (opt_s < 0) return 0;
    if (opt_s > 0) return (long)(opt_s * 1000.0 + 0.5);
    const char *v = hk__getenv(name);
    if (v) {
        char *end;
        double d = strtod(v, &end);
        if (end != v && *end == '\0' && d >= 0 && d < 1e9) return (long)(d * 1000.0 + 0.5);
        hk__log(HK_LOG_WARN, "ignoring %s=%s (not a number of seconds)", name, v);
    }
    return def_ms;
}

/* The token and where it came from (*src: "option", the variable's name or the file's path). */
static char *read_token(const hk_hub_options *o, char **src) {
    *src = NULL;
    if (o->token) {
        if (o->token[0]) *src = hk__strdup("option");
        return o->token[0] ? hk__strdup(o->token) : NULL;
    }
    if (hk__env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) return NULL;
    const char *v;
    if ((v = hk__getenv("HF_TOKEN"))) return *src = hk__strdup("HF_TOKEN"), hk__strdup(v);
    if ((v = hk__getenv("HUGGING_FACE_HUB_TOKEN"))) return *src = hk__strdup("HUGGING_FACE_HUB_TOKEN"), hk__strdup(v);
    char *path = NULL;
    if ((v = hk__getenv("HF_TOKEN_PATH"))) path = hk__strdup(v);
    else if ((v = hk__getenv("HF_HOME"))) path = hk__asprintf("%s/token", v);
    else if ((v = hk__getenv("XDG_CACHE_HOME"))) path = hk__asprintf("%s/huggingface/token", v);
    else if ((v = hk__getenv("HOME"))) path = hk__asprintf("%s/.cache/huggingface/token", v);
    if (!path) return NULL;
    char *data = NULL;
    if (hk__read_file(&data, NULL, path, 4096) != HK_OK) {
        hk_clear_error();
        free(path);
        return NULL;
    }
    char *s = data;
    while (*s == ' ' || *s == '\n' || *s == '\r' || *s == '\t') s++;
    size_t n = strcspn(s, " \r\n\t");
    char *tok = n ? hk__strndup(s, n) : NULL;
    free(data);
    if (tok) *src = path;
    else free(path);
    return tok;
}

/* 16 hex of the token's sha256 ("-" without one): part of the memo keys (client/memo.c). */
static void token_tag(char out[17], const char *token) {
    snprintf(out, 17, "-");
    if (!token) return;
    char hex[65];
    if (hk__sha256_hex(hex, token, strlen(token))) return;
    snprintf(out, 17, "%.16s", hex);
}

static char *default_user_agent(void) {
    if (hk__env_true("HF_HUB_DISABLE_TELEMETRY") || hk__env_true("DISABLE_TELEMETRY") || hk__env_true("DO_NOT_TRACK"))
        return NULL; /* like the kernels library: no User-Agent at all */
    struct utsname u;
    const char *m = uname(&u) == 0 ? u.machine : "unknown";
    const char *origin = hk__getenv("HF_HUB_USER_AGENT_ORIGIN");
    return hk__asprintf("hubkern/%s; hf_hub/compatible; c/11; platform/%s-linux; file_type/kernel%s%s", hk_version(), m,
                       origin ? "; origin/" : "", origin ? origin : "");
}

int hk_hub_new(hk_hub **out, const hk_hub_options *opts) {
    if (!out) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_new: NULL out");
    *out = NULL;
    hk_hub_options defaults = HK_HUB_OPTIONS_INIT;
    if (!opts) opts = &defaults;
    int vrc = hk__check_options_version("hk_hub_options", opts->version, HK_HUB_OPTIONS_VERSION);
    if (vrc) return vrc;
    if ((vrc = hk__client_global_init())) return vrc;
    hk_hub *h = calloc(1, sizeof *h);
    if (!h) return hk__fail(HK_ERR_NOMEM, "out of memory");
    const char *ep = opts->endpoint;
    if (!ep || !*ep) ep = hk__env_true("HUGGINGFACE_CO_STAGING") ? "https://hub-ci.huggingface.co" : hk__getenv("HF_ENDPOINT");
    if (!ep) ep = "https://huggingface.co";
    h->endpoint = hk__strdup(ep);
    if (!h->endpoint) goto oom;
    size_t el = strlen(h->endpoint);
    while (el > 0 && h->endpoint[el - 1] == '/') h->endpoint[--el] = '\0';
    if (!hk__str_starts_with(h->endpoint, "http://") && !hk__str_starts_with(h->endpoint, "https://")) {
        int rc = hk__fail(HK_ERR_INVALID_ARG, "endpoint '%s' must start with http:// or https://", h->endpoint);
        hk_hub_free(h);
        return rc;
    }
    h->token = read_token(opts, &h->token_source);
    int rc = hk_cache_root(&h->cache_root, opts->cache_dir, HK_REPO_KERNEL);
    if (rc) {
        hk_hub_free(h);
        return rc;
    }
    h->offline = opts->offline >= 0 ? opts->offline != 0
                                    : (hk__env_true("HF_HUB_OFFLINE") || hk__env_true("TRANSFORMERS_OFFLINE"));
    if (!h->offline) hk__curl_warn_if_old(); /* the network is about to be used */
    if (opts->user_agent) h->user_agent = opts->user_agent[0] ? hk__strdup(opts->user_agent) : NULL;
    else h->user_agent = default_user_agent();
    h->max_parallel = opts->max_parallel > 0 ? opts->max_parallel : 8;
    const char *mp = hk__getenv("HUBKERN_MAX_PARALLEL");
    if (mp && atoi(mp) > 0 && opts->max_parallel <= 0) h->max_parallel = atoi(mp);
    h->etag_timeout_ms = env_timeout_ms("HF_HUB_ETAG_TIMEOUT", opts->etag_timeout_s);
    h->download_timeout_ms = env_timeout_ms("HF_HUB_DOWNLOAD_TIMEOUT", opts->download_timeout_s);
    h->max_retries = opts->max_retries >= 0 ? opts->max_retries : 5;
    /* fields of version 2: absent from a version-1 struct */
    double req_s = opts->version >= 2 ? opts->request_timeout_s : 0, pull_s = opts->version >= 2 ? opts->pull_timeout_s : 0;
    h->request_timeout_ms = deadline_ms("HUBKERN_REQUEST_TIMEOUT", req_s, 300000);
    h->pull_timeout_ms = deadline_ms("HUBKERN_PULL_TIMEOUT", pull_s, 0);
    h->stall_timeout_ms = deadline_ms("HUBKERN_STALL_TIMEOUT", 0, HK_STALL_TIMEOUT_DEFAULT_MS);
    h->share = opts->version >= 4 && opts->share ? opts->share : hk__memo_default();
    h->freshness_ms = deadline_ms("HUBKERN_FRESHNESS_S", opts->version >= 3 ? opts->freshness_s : 0, HK_FRESHNESS_DEFAULT_MS);
    token_tag(h->token_tag, h->token);
    const char *rb = hk__getenv("HUBKERN_RETRY_BASE_MS");
    h->retry_base_ms = rb ? strtol(rb, NULL, 10) : 1000;
    if (h->retry_base_ms < 0) h->retry_base_ms = 0;
    h->max_listing_entries = env_bound("HUBKERN_MAX_LISTING_ENTRIES", opts->max_listing_entries, 1000000u);
    h->max_listing_bytes = env_bound("HUBKERN_MAX_LISTING_BYTES", opts->max_listing_bytes, (uint64_t)256 << 20);
    h->progress = opts->progress;
    h->progress_ud = opts->progress_userdata;
    if ((rc = hk__sig_config_new(&h->sig, opts))) { /* signatures (client/sig_config.c) */
        hk_hub_free(h);
        return rc;
    }
    *out = h;
    return HK_OK;
oom:
    hk_hub_free(h);
    return hk__fail(HK_ERR_NOMEM, "out of memory");
}

void hk_hub_free(hk_hub *h) {
    if (!h) return;
    if (h->api) curl_easy_cleanup(h->api);
    free(h->endpoint);
    if (h->token) memset(h->token, 0, strlen(h->token));
    free(h->token);
    free(h->token_source);
    free(h->newer_warned);
    free(h->cache_root);
    free(h->user_agent);
    hk__sig_config_free(h->sig);
    free(h);
}

const char *hk_hub_endpoint(const hk_hub *h) { return h->endpoint; }
const char *hk_hub_cache_root(const hk_hub *h) { return h->cache_root; }
int hk_hub_is_offline(const hk_hub *h) { return h->offline; }
int hk_hub_set_read_only(hk_hub *h, int on) {
    if (!h) return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_set_read_only: NULL hub");
    h->read_only = on != 0;
    return HK_OK;
}
const char *hk_hub_token_source(const hk_hub *h) { return h && h->token ? h->token_source : NULL; }

void hk_hub_strv_free(char **v) {
    if (!v) return;
    for (char **p = v; *p; p++) free(*p);
    free(v);
}


int hk__client_check_repo_id(const char *repo_id) {
    if (!hk__kernel_repo_id_valid(repo_id))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a kernel repo id (expected org/name)", repo_id ? repo_id : "(null)");
    return HK_OK;
}

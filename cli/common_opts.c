/* Options and checks shared by the Hub commands (pull, versions, info, load, lock, download), and
 * the one-line note they print when kernel-status.toml redirects: see cli/cli.h. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_HUB_ENDPOINT_OPT \
    {HK_OPT_VALUE, "endpoint", 0, "URL", "the Hub or mirror (default: HF_ENDPOINT, else https://huggingface.co)", NULL, NULL}
#define HK_HUB_CACHE_OPT                                                                                           \
    {HK_OPT_VALUE, "cache-dir", 0, "DIR", "the cache (default: KERNELS_CACHE, HF_HUB_CACHE, HF_HOME/hub, ...)", \
     "cache", NULL}

const cli_opt cli_hub_opts[] = {
    HK_HUB_ENDPOINT_OPT,
    HK_HUB_CACHE_OPT,
    {HK_OPT_VALUE, "token", 0, "TOKEN", "the Hub token (default: HF_TOKEN, then the token file); never printed", NULL,
     NULL},
    {HK_OPT_FLAG, "offline", 0, NULL, "no network: the cache only (also HF_HUB_OFFLINE=1)", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

const cli_opt cli_hub_opts_online[] = {
    HK_HUB_ENDPOINT_OPT,
    HK_HUB_CACHE_OPT,
    {HK_OPT_VALUE, "token", 0, "TOKEN", "the Hub token (default: HF_TOKEN, then the token file); never printed", NULL,
     NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

static bool spec_has(const cli_spec *s, const char *name) { return cli_spec_has(s, name) != 0; }

void cli_hub_args_get(cli_hub_args *h, const cli_args *a) {
    memset(h, 0, sizeof *h);
    if (spec_has(a->spec, "endpoint")) h->endpoint = cli_str(a, "endpoint");
    if (spec_has(a->spec, "cache-dir")) h->cache = cli_str(a, "cache-dir");
    if (spec_has(a->spec, "token")) h->token = cli_str(a, "token");
    if (spec_has(a->spec, "offline")) h->offline = cli_count(a, "offline") > 0;
}

int cli_hub_open(hk_hub **out, const cli_hub_args *a, hk_progress_fn progress, void *ud) {
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = a->endpoint;
    o.cache_dir = a->cache;
    o.token = a->token;
    cli_set_token_option(a->token != NULL);
    if (a->offline) o.offline = 1;
    o.max_parallel = a->max_workers;
    o.progress = progress;
    o.progress_userdata = ud;
    return hk_hub_new(out, &o);
}

int cli_check_backend(const char *backend) {
    if (!backend) return 0;
    char known[160] = "";
    for (int k = HK_BACKEND_CUDA; k <= HK_BACKEND_TPU; k++) {
        const char *n = hk_backend_kind_name((hk_backend_kind)k);
        if (strcmp(n, backend) == 0) return 0;
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", *known ? ", " : "", n);
    }
    return cli_usage_error("--backend '%s' is not a backend (one of: %s)", backend, known);
}

const char *cli_repo_arg(char *buf, size_t cap, const char *arg) {
    static const char *const prefixes[] = {"kernel/", "kernels/", "kernels--"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i]);
        if (strncmp(arg, prefixes[i], n) != 0) continue;
        const char *rest = arg + n, *sep = strstr(rest, i == 2 ? "--" : "/");
        if (!sep || sep == rest) break;
        if (i == 2) snprintf(buf, cap, "%.*s/%s", (int)(sep - rest), rest, sep + 2);
        else snprintf(buf, cap, "%s", rest);
        return buf;
    }
    snprintf(buf, cap, "%s", arg);
    return buf;
}

bool cli_note_redirect(const char *asked, const char *repo, const char *what) {
    if (!asked || !repo || !*repo || strcmp(asked, repo) == 0) return false; /* "": a local kernel */
    fprintf(stderr, "hubkern %s: note: %s redirects to %s (kernel-status.toml)%s%s\n", cli_command(), asked, repo, what ? "; " : "",
            what ? what : "");
    return true;
}

/* The values of a repeatable option as a NULL-terminated list; NULL when none was given (or out of
 * memory: *oom set). */
static const char **option_list(const cli_args *a, const char *name, bool *oom) {
    int n = cli_count(a, name);
    if (n == 0) return NULL;
    const char **v = calloc((size_t)n + 1, sizeof *v);
    if (!v) {
        *oom = true;
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < a->nocc; i++)
        if (strcmp(a->occ[i].opt->name, name) == 0) v[k++] = a->occ[i].value;
    return v;
}

int cli_pattern_lists(const char ***include, const char ***exclude, const cli_args *a) {
    bool oom = false;
    *include = option_list(a, "include", &oom);
    *exclude = option_list(a, "exclude", &oom);
    int rc = oom ? cli_fail(1, "HK_ERR_NOMEM", "out of memory") : 0;
    for (size_t i = 0; rc == 0 && *include && (*include)[i]; i++)
        if (!(*include)[i][0]) rc = cli_usage_error("--include needs a pattern");
    for (size_t i = 0; rc == 0 && *exclude && (*exclude)[i]; i++)
        if (!(*exclude)[i][0]) rc = cli_usage_error("--exclude needs a pattern");
    if (rc) {
        free(*include);
        free(*exclude);
        *include = *exclude = NULL;
    }
    return rc;
}

/* kernel-status.toml (client/status_toml.c: the redirect subset of TOML) through the real client:
 * the fake Hub answers the refs and trust requests itself and serves the input as the toml file of
 * every repo, so redirect chains (loops, hops, odd quoting) come from the input alone. */
#include "fake_hub.h"
#include "fuzz_util.h"
#include "hubkern/hub.h"

static const uint8_t *cur;
static size_t cur_size;
static hk_hub *hub;
static char cache[600];

static void answer(hk_strbuf *out, unsigned index, const char *line) {
    (void)index;
    if (strstr(line, "/kernel-status.toml")) {
        static const char h[] = "X-Repo-Commit: 0123456789abcdef0123456789abcdef01234567";
        hk_fake_response(out, 200, h, sizeof h - 1, (const char *)cur, cur_size);
    } else if (strstr(line, "/refs")) {
        static const char refs[] =
            "{\"branches\":[{\"name\":\"main\",\"ref\":\"refs/heads/main\",\"targetCommit\":"
            "\"0123456789abcdef0123456789abcdef01234567\"},{\"name\":\"v1\",\"ref\":\"refs/heads/v1\","
            "\"targetCommit\":\"89abcdef0123456789abcdef0123456789abcdef\"}],\"tags\":[]}";
        hk_fake_response(out, 200, "", 0, refs, sizeof refs - 1);
    } else if (strstr(line, "/tree/")) { /* the commit's listing: it has a kernel-status.toml, so the client asks for it */
        static const char tree[] = "[{\"type\":\"file\",\"oid\":\"0123456789abcdef0123456789abcdef01234567\","
                                   "\"size\":1,\"path\":\"kernel-status.toml\"}]";
        hk_fake_response(out, 200, "", 0, tree, sizeof tree - 1);
    } else if (strstr(line, "/overview")) {
        static const char ov[] = "{\"trustedKernelPublisher\": true}";
        hk_fake_response(out, 200, "", 0, ov, sizeof ov - 1);
    } else {
        static const char h[] = "X-Error-Code: EntryNotFound";
        hk_fake_response(out, 404, h, sizeof h - 1, "", 0);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *endpoint = hk_fake_hub_start(answer);
    snprintf(cache, sizeof cache, "%s/cache", hk_fuzz_dir("toml"));
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = endpoint;
    o.cache_dir = cache;
    o.offline = 0;
    o.token = "";
    o.max_retries = 0;
    o.etag_timeout_s = 5;
    o.freshness_s = -1; /* every input is asked for again: no answer memoised from the one before */
    if (hk_hub_new(&hub, &o) != HK_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) return 0;
    cur = data;
    cur_size = size;
    hk_pull_spec s = HK_PULL_SPEC_INIT;
    s.repo_id = "org/relu";
    s.kernel_version = 1;
    char *repo = NULL, *rev = NULL, *commit = NULL;
    if (hk_hub_resolve_spec(&repo, &rev, &commit, hub, &s) == HK_OK) {
        if (!repo || !rev || !commit) abort();
    }
    hk_free(repo);
    hk_free(rev);
    hk_free(commit);
    hk__rmtree(cache);
    return 0;
}

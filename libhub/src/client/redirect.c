/* Following kernel-status.toml redirects from a pull spec to the repo and commit it ends at, with
 * the publisher check of every repo on the way and loop detection (hk_hub_resolve_spec). */
#include "client/client.h"
#include "client/signature.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One repo visited while following redirects: the revision asked there and the commit it had. */
typedef struct redirect_hop {
    char *repo, *rev;
    char commit[65];
} redirect_hop;

#define HK_MAX_REDIRECTS 5

/* Fail with the chain hops[0..n-1] followed by the revisit of hops[again] (same repo, and the same
 * revision name or the same commit): a loop that no number of hops would leave. */
static int fail_redirect_loop(const redirect_hop *hops, size_t n, size_t again, bool by_commit) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    for (size_t i = 0; i < n; i++) hk__sb_printf(&sb, "%s%s@%s", i ? " -> " : "", hops[i].repo, hops[i].rev);
    if (by_commit)
        hk__sb_printf(&sb, " (commit %.12s, as %s@%s)", hops[n - 1].commit, hops[again].repo, hops[again].rev);
    int rc = hk__fail(HK_ERR_PROTOCOL,
                     "kernel-status.toml redirects loop: %s; fix the kernel-status.toml of one of them",
                     sb.data ? sb.data : "?");
    hk__sb_free(&sb);
    return rc;
}

/* One hop of a chain: the publisher of repo checked (unless spec->trust_remote_code) and its
 * version or revision resolved into commit. A hubkern mirror's refs answer carries the trust answer
 * too (client/refs.c), so it is asked first and a cold pull needs no overview request; a refs error
 * is reported after the trust answer, in the order kernels reports them. */
static int resolve_hop(char commit[65], hk_hub *hub, const hk_pull_spec *spec, const char *repo, int hop_version,
                       const char *hop_rev) {
    bool resolved = false;
    char *resolve_err = NULL; /* the refs error, reported after the trust answer (as kernels orders them) */
    int resolve_rc = HK_OK;
    char org[128];
    snprintf(org, sizeof org, "%.*s", (int)(strchr(repo, '/') - repo), repo);
    if (!spec->trust_remote_code && !hk__client_trust_known(hub, org) && (!hop_rev || !hk__is_commit_id(hop_rev))) {
        resolve_rc = hk__client_resolve_commit(commit, hub, repo, hop_version, hop_rev);
        /* no answer at all (unreachable, stalled, a 5xx or 429 after the retries, a broken
         * answer): the overview would fare no better, so that error is the one reported */
        if (resolve_rc == HK_ERR_NOMEM || resolve_rc == HK_ERR_NETWORK || resolve_rc == HK_ERR_TIMEOUT ||
            resolve_rc == HK_ERR_HTTP || resolve_rc == HK_ERR_RATE_LIMITED || resolve_rc == HK_ERR_PROTOCOL ||
            resolve_rc == HK_ERR_CANCELLED)
            return resolve_rc;
        resolved = resolve_rc == HK_OK;
        if (!resolved && !(resolve_err = hk__strdup(hk_last_error()))) return hk__fail(HK_ERR_NOMEM, "out of memory");
        hk_clear_error();
    }
    if (!spec->trust_remote_code) {
        int trusted = 0;
        int rc = hk_hub_check_trust(&trusted, hub, org);
        if (rc) {
            free(resolve_err);
            return rc;
        }
        if (!trusted) {
            free(resolve_err);
            return hk__fail(HK_ERR_UNTRUSTED,
                            "kernel repository '%s' is not from a trusted publisher (or its trust status could not "
                            "be verified); pass --trust-remote-code (trust_remote_code = 1) to load it anyway",
                            repo);
        }
    }
    if (resolve_err) {
        int rc = hk__fail(resolve_rc, "%s", resolve_err);
        free(resolve_err);
        return rc;
    }
    return resolved ? HK_OK : hk__client_resolve_commit(commit, hub, repo, hop_version, hop_rev);
}

/* Resolve spec's version/revision and follow kernel-status.toml redirects (online), checking the
 * publisher of every repo on the way unless trust_remote_code. *out_repo: the final repo;
 * *out_redirect_rev: the revision the last redirect named, NULL when none was followed; *mode: on
 * entry the mode in force for spec->repo_id, on return the one in force at the end of the chain
 * (the redirect file is unsigned, so a redirect must not lower it: kernels-community/x redirecting
 * to an unsigned other/y stays under require). A redirect back to a repo already visited, at the
 * same revision name or the same commit, fails at once (HK_ERR_PROTOCOL naming the loop); a chain
 * of more than HK_MAX_REDIRECTS redirects fails too. */
static int follow_redirects(char **out_repo, char **out_redirect_rev, char commit[65], int *mode, hk_hub *hub,
                            const hk_pull_spec *spec) {
    *out_repo = *out_redirect_rev = NULL;
    redirect_hop hops[HK_MAX_REDIRECTS + 2];
    size_t n = 0;
    int rc = HK_OK;
    hops[0].repo = hk__strdup(spec->repo_id);
    hops[0].rev = spec->revision ? hk__strdup(spec->revision) : hk__asprintf("v%d", spec->kernel_version);
    hops[0].commit[0] = '\0';
    n = 1;
    if (!hops[0].repo || !hops[0].rev) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    while (rc == HK_OK) {
        redirect_hop *h = &hops[n - 1];
        const char *repo = h->repo;
        /* back at a (repo, revision) of the chain: a loop, known before asking the Hub again */
        for (size_t i = 0; i + 1 < n && rc == HK_OK; i++)
            if (strcmp(hops[i].repo, repo) == 0 && strcmp(hops[i].rev, h->rev) == 0)
                rc = fail_redirect_loop(hops, n, i, false);
        if (rc) break;
        if (n > HK_MAX_REDIRECTS + 1) {
            rc = hk__fail(HK_ERR_PROTOCOL, "kernel-status.toml redirects form a chain longer than %d from %s",
                         HK_MAX_REDIRECTS, spec->repo_id);
            break;
        }
        if ((rc = hk__client_check_repo_id(repo))) break;
        int hop_version = n > 1 ? -1 : spec->kernel_version;
        const char *hop_rev = n > 1 ? h->rev : spec->revision;
        if ((rc = resolve_hop(commit, hub, spec, repo, hop_version, hop_rev))) break;
        snprintf(h->commit, sizeof h->commit, "%s", commit);
        /* another name of a commit already visited (a@main -> b -> a@v1, main == v1) loops as well */
        for (size_t i = 0; i + 1 < n && rc == HK_OK; i++)
            if (strcmp(hops[i].repo, repo) == 0 && strcmp(hops[i].commit, commit) == 0)
                rc = fail_redirect_loop(hops, n, i, true);
        if (rc) break;
        char *dest = NULL, *drev = NULL;
        if ((rc = hk__client_check_status(&dest, &drev, hub, repo, commit))) break;
        if (!dest) break;
        *mode = hk__sig_request_mode(hub->sig, spec->signature, *mode, dest);
        hk__log(HK_LOG_WARN, "'%s' redirected to '%s' (revision %s; signature %s)", repo, dest, drev,
                hk_signature_mode_name(*mode));
        hops[n].repo = dest;
        hops[n].rev = drev;
        hops[n].commit[0] = '\0';
        n++;
    }
    if (rc == HK_OK && n > 1) {
        *out_repo = hops[n - 1].repo;
        *out_redirect_rev = hops[n - 1].rev;
        hops[n - 1].repo = hops[n - 1].rev = NULL;
    } else if (rc == HK_OK) {
        *out_repo = hops[0].repo;
        hops[0].repo = NULL;
    }
    for (size_t i = 0; i < n; i++) {
        free(hops[i].repo);
        free(hops[i].rev);
    }
    return rc;
}

void hk__target_free(hk__target *t) {
    free(t->repo);
    free(t->revision);
    memset(t, 0, sizeof *t);
}

int hk__client_resolve_target(hk__target *t, hk_hub *hub, const hk_pull_spec *spec, int floor) {
    memset(t, 0, sizeof *t);
    int rc = hk__client_check_repo_id(spec->repo_id);
    if (rc) return rc;
    if ((spec->kernel_version >= 0) == (spec->revision != NULL))
        return hk__fail(HK_ERR_INVALID_ARG, "give exactly one of a version or a revision for %s", spec->repo_id);
    if (spec->revision && !hk__revision_valid(spec->revision))
        return hk__fail(HK_ERR_INVALID_ARG, "'%s' is not a revision name (a branch, tag or commit)", spec->revision);
    t->signature = hk__sig_request_mode(hub->sig, spec->signature, floor, spec->repo_id);
    char *redirect_rev = NULL;
    if (hub->offline) { /* the cache keeps no kernel-status.toml: nothing to follow */
        rc = hk__client_resolve_commit(t->commit, hub, spec->repo_id, spec->kernel_version, spec->revision);
        if (rc == HK_OK && !(t->repo = hk__strdup(spec->repo_id))) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    } else {
        rc = follow_redirects(&t->repo, &redirect_rev, t->commit, &t->signature, hub, spec);
    }
    if (rc == HK_OK) {
        t->revision = redirect_rev ? redirect_rev : spec->revision ? hk__strdup(spec->revision)
                                                                   : hk__asprintf("v%d", spec->kernel_version);
        redirect_rev = NULL;
        if (!t->revision) rc = hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    free(redirect_rev);
    if (rc) {
        hk__target_free(t);
        return hk__fail_context("resolving %s", spec->repo_id);
    }
    return HK_OK;
}

int hk_hub_resolve_spec(char **out_repo, char **out_revision, char **out_commit_id, hk_hub *hub,
                        const hk_pull_spec *spec) {
    if (out_repo) *out_repo = NULL;
    if (out_revision) *out_revision = NULL;
    if (out_commit_id) *out_commit_id = NULL;
    if (!out_repo || !out_revision || !out_commit_id || !hub || !spec)
        return hk__fail(HK_ERR_INVALID_ARG, "hk_hub_resolve_spec: NULL argument");
    int rc = hk__check_options_version("hk_pull_spec", spec->version, HK_PULL_SPEC_VERSION);
    if (rc) return rc;
    hk__target t;
    if ((rc = hk__client_resolve_target(&t, hub, spec, 0))) return rc;
    char *c = hk__strdup(t.commit);
    if (!c) {
        hk__target_free(&t);
        return hk__fail(HK_ERR_NOMEM, "out of memory");
    }
    *out_repo = t.repo;
    *out_revision = t.revision;
    *out_commit_id = c;
    hk_clear_error();
    return HK_OK;
}

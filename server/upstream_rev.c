/* Revisions from upstream: a branch or tag maps to a commit for the revision TTL (the ref file's
 * mtime is when it was last confirmed, so every process over the store agrees); a commit id is
 * immutable. One GET /api/T/{repo}/revision/{rev}?blobs=true gives the commit and, per file, the
 * etag and size that later downloads are checked against (the manifest).
 *
 * On an upstream failure a branch known before is served as it was (stale-if-error, marked "stale"
 * in the access log); 4xx answers (404, 410, 403 ...; not 429) are remembered for the negative TTL;
 * nothing else is cached. Refs and organization overviews are passed through in one canonical form
 * (checked names, only the query parameter the route uses), memoised for the revision TTL in a memo
 * bounded by bytes (--upstream-memo-bytes, least recently used first out).
 *
 * A commit's manifest holds what upstream claimed until bytes contradict it (upstream_blob.c): then
 * it keeps only the verified entries and is marked partial, so that the commit (and a branch naming
 * it) is asked again, and an upstream that was lying once is not believed for good. */
#include "server/srv_http.h"

#include "util/strmap.h"
#include "util/text.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void answer(up_answer *a, unsigned status, const char *code, unsigned retry, const char *msg) {
    a->status = status;
    a->code = code;
    a->retry_after = retry;
    snprintf(a->msg, sizeof a->msg, "%s", msg);
}

/* The error code of a remembered 404 as a static string. */
static const char *known_code(const char *c) {
    if (strcmp(c, "RepoNotFound") == 0) return "RepoNotFound";
    if (strcmp(c, "RevisionNotFound") == 0) return "RevisionNotFound";
    if (strcmp(c, "EntryNotFound") == 0) return "EntryNotFound";
    return NULL;
}

/* Is the store's knowledge of rev good enough without asking upstream? *until: when a "yes" ends
 * (a branch's ref mtime + TTL; 0 for a commit, immutable unless marked partial). */
static bool rev_fresh(const char *root, const char *repo_dir, const char *rev, unsigned ttl, bool *known,
                      time_t *until) {
    *known = false;
    *until = 0;
    if (hk__is_commit_id(rev)) {
        /* record_revision writes the manifest before the snapshot folder, and the store resolves a
         * commit by its folder: a manifest alone is another process between the two steps, whose
         * second step (idempotent) is taken here so that the commit resolves at once */
        char *snap = hk_cache_snapshot_path(repo_dir, rev, NULL);
        bool have = snap && hk__is_dir(snap);
        if (snap && !have && srv_manifest_exists(root, repo_dir, rev)) have = hk__mkdirs(snap, 0755) == HK_OK;
        free(snap);
        *known = have; /* what it holds stays servable (stale) while upstream cannot answer */
        /* commit-addressed: immutable, unless bytes contradicted its claims: then asked again */
        return have && !srv_manifest_partial(root, repo_dir, rev);
    }
    if (!hk__path_is_safe_relative(rev)) return false;
    char *ref = hk_cache_ref_path(repo_dir, rev);
    struct stat st;
    bool have = ref && stat(ref, &st) == 0 && S_ISREG(st.st_mode);
    free(ref);
    *known = have;
    if (!have) return false;
    char commit[65];
    /* a branch naming a commit whose claims were contradicted is asked again too */
    bool partial = srv_store_resolve_rev(commit, repo_dir, rev) == HK_OK && srv_manifest_partial(root, repo_dir, commit);
    hk_clear_error();
    *until = st.st_mtime + (time_t)ttl;
    return !partial && difftime(time(NULL), st.st_mtime) < (double)ttl;
}

/* Siblings of a revision answer into a listing (the manifest). */
/* The upstream's names enter here: each a repo path under the one rule the routes use
 * (hk__repo_path_valid: no component over 255 bytes, no invalid UTF-8), each once (a second entry
 * with another blob would make the store's listing say two things), each size a byte count. */
static int siblings_listing(srv_listing *l, const cJSON *sibs) {
    const cJSON *s;
    hk_strmap seen; /* keys: the listing's own copies of the names */
    hk__strmap_init(&seen);
    int rc = HK_OK;
    cJSON_ArrayForEach(s, sibs) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "rfilename");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(s, "size");
        const cJSON *blob = cJSON_GetObjectItemCaseSensitive(s, "blobId");
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(s, "lfs");
        const cJSON *sha = lfs ? cJSON_GetObjectItemCaseSensitive(lfs, "sha256") : NULL;
        uint64_t bytes = 0;
        if (!cJSON_IsString(name) || !hk__repo_path_valid(name->valuestring) || !cJSON_IsNumber(size) ||
            !hk__byte_count(&bytes, size->valuedouble)) {
            rc = hk__fail(HK_ERR_PROTOCOL, "upstream revision: a sibling without a repo path for a name and a byte count "
                          "for a size");
            break;
        }
        if (hk__strmap_get(&seen, name->valuestring, NULL)) {
            rc = hk__fail(HK_ERR_PROTOCOL, "upstream revision: it names %s twice", name->valuestring);
            break;
        }
        const char *etag = cJSON_IsString(sha) ? sha->valuestring : cJSON_IsString(blob) ? blob->valuestring : NULL;
        bool is_lfs = cJSON_IsString(sha);
        if (!etag || !hk__is_hex(etag, is_lfs ? 64 : 40)) {
            rc = hk__fail(HK_ERR_PROTOCOL, "upstream revision: %s has no usable blobId / lfs.sha256", name->valuestring);
            break;
        }
        char *p = hk__strdup(name->valuestring);
        rc = p ? srv_listing_add_file(l, p, bytes, etag, is_lfs) : hk__fail(HK_ERR_NOMEM, "out of memory");
        if (rc) {
            free(p);
            break;
        }
        if ((rc = hk__strmap_put(&seen, p, 0))) break; /* p is the listing's now: freed with it */
    }
    hk__strmap_free(&seen);
    return rc;
}

/* Record an upstream revision answer: manifest, snapshot folder, ref. */
static int record_revision(srv_store *store, const char *repo_dir, const char *rev, const char *json, char commit[65]) {
    const char *root = srv_store_root(store);
    cJSON *doc = cJSON_Parse(json);
    const cJSON *sha = doc ? cJSON_GetObjectItemCaseSensitive(doc, "sha") : NULL;
    const cJSON *sibs = doc ? cJSON_GetObjectItemCaseSensitive(doc, "siblings") : NULL;
    int rc = HK_OK;
    if (!cJSON_IsString(sha) || !hk__is_commit_id(sha->valuestring) || !cJSON_IsArray(sibs))
        rc = hk__fail(HK_ERR_PROTOCOL, "upstream revision answer without sha / siblings");
    else if (hk__is_commit_id(rev) && strcmp(rev, sha->valuestring) != 0)
        rc = hk__fail(HK_ERR_PROTOCOL, "upstream answered commit %s for commit %s", sha->valuestring, rev);
    if (rc == HK_OK) snprintf(commit, 65, "%s", sha->valuestring);
    if (rc == HK_OK && (!srv_manifest_exists(root, repo_dir, commit) || srv_manifest_partial(root, repo_dir, commit))) {
        srv_listing l;
        memset(&l, 0, sizeof l);
        rc = siblings_listing(&l, sibs);
        if (rc == HK_OK) rc = srv_manifest_write(root, repo_dir, commit, &l);
        srv_listing_free(&l);
        srv_store_forget_listing(store, repo_dir, commit); /* the next listing reads the new claims */
    }
    cJSON_Delete(doc);
    if (rc == HK_OK) {
        char *snap = hk_cache_snapshot_path(repo_dir, commit, NULL);
        rc = snap ? hk__mkdirs(snap, 0755) : hk_last_error_code();
        free(snap);
    }
    if (rc == HK_OK && !hk__is_commit_id(rev)) rc = hk_cache_write_ref(repo_dir, rev, commit);
    return rc;
}

/* The answer to a remembered upstream 4xx: a 404 as the Hub's, anything else a 502. */
static void neg_answer(up_answer *a, unsigned st, const char *code) {
    if (st == 404 || st == 410) answer(a, 404, known_code(code), 0, "Not found upstream");
    else {
        char msg[80];
        snprintf(msg, sizeof msg, "Upstream refused it (HTTP %u)", st);
        answer(a, 502, NULL, 0, msg);
    }
}

/* An upstream answer worth remembering briefly as a negative one: a 4xx other than 429. */
static bool negative_status(long st) { return st >= 400 && st < 500 && st != 429; }

/* After a failed refresh: the remembered 404, the back-off, the stale ref, a 503 (unavailable) or
 * a 502. */
static int after_failure(srv_upstream *u, const char *negkey, bool known, unsigned backoff, bool unavailable, up_mark *mark,
                         up_answer *ans) {
    unsigned st = 0;
    char code[48];
    if (srv_up_memo_get(u, negkey, u->neg_ttl, NULL, &st, code)) {
        neg_answer(ans, st, code);
        return 1;
    }
    if (known) {
        *mark = UP_STALE;
        hk_clear_error();
        return 0;
    }
    if (backoff) {
        answer(ans, 429, NULL, backoff, "Upstream rate limit: retry later");
        return 1;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "Upstream unavailable: %s", hk_last_error_code() ? hk_last_error() : "bad answer");
    /* unavailable (a 503, no answer, a stall past --upstream-timeout): try again later */
    answer(ans, unavailable ? 503 : 502, NULL, unavailable ? 5 : 0, msg);
    return 1;
}

static void over_budget(up_answer *ans, unsigned retry) {
    answer(ans, 429, NULL, retry, "Too many upstream misses from this client (--client-miss-budget): retry later");
}

/* A revision step for a transfer thread: the repo and revision copied out of the request. */
typedef struct rev_arg {
    hk_repo_type type;
    char *id, *rev;
} rev_arg;

static void rev_arg_free(void *p) {
    rev_arg *a = p;
    if (!a) return;
    free(a->id);
    free(a->rev);
    free(a);
}

static void *rev_arg_new(const repo_ref *repo, const char *rev) {
    rev_arg *a = calloc(1, sizeof *a);
    if (a) a->type = repo->type;
    if (a && (!(a->id = hk__strdup(repo->id)) || !(a->rev = hk__strdup(rev)))) {
        rev_arg_free(a);
        a = NULL;
    }
    hk_clear_error();
    return a;
}

static void rev_job(srv_server *srv, void *arg, up_result *res) {
    rev_arg *a = arg;
    repo_ref repo = {.type = a->type, .id = a->id};
    res->out = srv_up_revision(srv, &repo, a->rev, &res->mark, &res->ans, NULL);
    free(repo.dir);
}

int srv_up_revision(srv_server *srv, repo_ref *repo, const char *rev, up_mark *mark, up_answer *ans, bool *kept) {
    srv_upstream *u = srv->up;
    const char *root = srv_store_root(srv->store);
    *mark = UP_HIT;
    if (kept) *kept = false;
    if (!hk_repo_id_valid(repo->id)) { /* never pasted into an upstream URL */
        answer(ans, 400, NULL, 0, "Invalid repo id");
        return 1;
    }
    /* a warm request: the kept verdict, no file-system work (upstream_verdict.c: why it holds). Only
     * with the router's repo folder (a removed repo is seen there), never for a resumed request (its
     * step's answer comes first) */
    if (repo->dir && *rev && !srv_up_has_steps() && srv_up_verdict_kept(u->verdicts, repo->type, repo->id, rev)) {
        atomic_fetch_add(&srv->metrics.rev_kept, 1);
        if (kept) *kept = true;
        return 0;
    }
    char *repo_dir = srv_store_repo_path(srv->store, repo->type, repo->id); /* checked id: inside the root */
    if (!repo_dir || !*rev) {
        hk_clear_error();
        free(repo_dir);
        return 0;
    }
    bool known;
    int out = 0;
    char *key = NULL, *negkey = NULL;
    char lockname[80];
    char hex[65];
    /* a hit (every warm request) is decided before any key is made: a resumed request first */
    const up_result *step = NULL;
    if (srv_up_has_steps()) {
        if (!(key = hk__asprintf("rev:%s/%s@%s", hk_repo_type_plural(repo->type), repo->id, rev))) goto done;
        step = srv_up_step_done(key);
    }
    if (step) { /* done on a transfer thread for this request: its answer, not another ask */
        *mark = step->mark;
        if (step->out) *ans = step->ans, out = 1;
        goto done;
    }
    uint64_t gen = srv_up_verdict_gen(u->verdicts); /* before the check: a change after it voids the keep */
    time_t until;
    atomic_fetch_add(&srv->metrics.rev_checked, 1);
    if (rev_fresh(root, repo_dir, rev, u->rev_ttl, &known, &until)) {
        srv_up_verdict_keep(u->verdicts, repo->type, repo->id, rev, until, gen);
        goto done;
    }
    if (!key) key = hk__asprintf("rev:%s/%s@%s", hk_repo_type_plural(repo->type), repo->id, rev);
    negkey = hk__asprintf("neg:%s/%s@%s", hk_repo_type_plural(repo->type), repo->id, rev);
    if (!key || !negkey) goto done;
    hk__sha256_hex(hex, rev, strlen(rev)); /* "" when out of memory: the lock is then shared */
    snprintf(lockname, sizeof lockname, "rev-%.32s", hex);
    unsigned st;
    char code[48];
    if (srv_up_memo_get(u, negkey, u->neg_ttl, NULL, &st, code)) {
        neg_answer(ans, st, code);
        out = 1;
        goto done;
    }
    unsigned retry;
    if (!srv_up_client_may_miss(u, &retry)) { /* what the store has is still served */
        if (known) *mark = UP_STALE;
        else over_budget(ans, retry), out = 1;
        goto done;
    }
    if (srv_up_deferring()) { /* a pool thread: the rest runs on a transfer thread */
        *mark = UP_NONE;
        out = srv_up_defer(key, NULL, rev_job, rev_arg_new(repo, rev), rev_arg_free, ans);
        goto done;
    }
    up_answer leader;
    double wait_s = srv_up_wait_s(u, 0);
    if (!srv_up_enter(u->waits, key, wait_s, &u->stopping, &leader)) { /* another thread of this process asked */
        atomic_fetch_add(&srv->metrics.coalesced, 1);
        *mark = UP_COALESCED;
        if (!leader.status || rev_fresh(root, repo_dir, rev, u->rev_ttl, &known, &until)) goto done;
        if (known) out = after_failure(u, negkey, known, 0, leader.status == 503, mark, ans); /* stale, or a 404 */
        else *ans = leader, out = 1;
        goto done;
    }
    int fd = srv_up_lock(u, root, repo_dir, lockname, wait_s);
    int rc = HK_OK;
    if (fd == -2) { /* another process's request for it is past the deadline (or this client left) */
        if (known) *mark = UP_STALE;
        else answer(ans, 503, NULL, 5, "Upstream unavailable: another request for this revision is still running"), out = 1;
    } else if (rev_fresh(root, repo_dir, rev, u->rev_ttl, &known, &until)) { /* another process did it meanwhile */
        *mark = UP_COALESCED;
        atomic_fetch_add(&srv->metrics.coalesced, 1);
    } else {
        char *erev = hk__pct_encode(rev, false);
        char *pq = erev ? hk__asprintf("/api/%s/%s/revision/%s?blobs=true", hk_repo_type_plural(repo->type), repo->id,
                                       erev)
                        : NULL;
        free(erev);
        up_resp r;
        srv_up_resp_init(&r);
        r.lead_key = key;
        unsigned backoff = 0;
        atomic_fetch_add(&srv->metrics.up_fetches, 1);
        srv_up_client_spend(u);
        rc = pq ? srv_up_get(u, pq, &r, &backoff) : HK_ERR_NOMEM;
        free(pq);
        if (rc == HK_OK && r.status == 200) {
            char commit[65];
            rc = record_revision(srv->store, repo_dir, rev, r.body.data ? r.body.data : "", commit);
            srv_up_verdict_forget(u->verdicts, repo->type, repo->id); /* the store changed under them */
            if (rc == HK_OK) *mark = UP_MISS;
        } else if (rc == HK_OK && negative_status(r.status)) {
            srv_up_memo_put(u, negkey, NULL, (unsigned)r.status, r.error_code); /* made-up revisions cost one miss each */
            rc = r.status == 404 || r.status == 410 ? HK_ERR_REVISION_NOT_FOUND
                                                    : hk__fail(HK_ERR_HTTP, "upstream answered HTTP %ld", r.status);
        } else if (rc == HK_OK) {
            rc = hk__fail(HK_ERR_HTTP, "upstream answered HTTP %ld", r.status);
        }
        if (rc != HK_OK) {
            atomic_fetch_add(&srv->metrics.up_errors, 1);
            if (backoff) atomic_fetch_add(&srv->metrics.up_rate_limited, 1);
            out = after_failure(u, negkey, known, backoff, srv_up_unavailable(rc, r.status), mark, ans);
        }
        srv_up_resp_free(&r);
    }
    srv_up_unlock(fd);
    srv_up_leave(u->waits, key, out ? ans : NULL);
done:
    if (!out && !(repo->dir && *mark == UP_HIT)) { /* a hit changed nothing: the router's folder stands */
        free(repo->dir);
        repo->dir = srv_store_repo_dir(srv->store, repo->type, repo->id);
    }
    free(key);
    free(negkey);
    free(repo_dir);
    return out;
}

/* The one form in which a pass-through request goes upstream and into the memo: the route's path
 * from checked names, and of the query only what the route uses (refs: include_prs), in one
 * spelling. Distinct spellings of one question would otherwise each cost an upstream fetch and a
 * memo entry. NULL: not a pass-through route, or a name that is not one. */
static char *canon_passthrough(const char *pq) {
    static const char *const types[] = {"models", "datasets", "spaces", "kernels"};
    size_t plen = strcspn(pq, "?");
    char *path = hk__strndup(pq, plen);
    const char *query = pq[plen] == '?' ? pq + plen + 1 : "";
    char *seg[6] = {0};
    size_t n = 0;
    for (char *p = path, *save = NULL, *t; path && n < 6 && (t = strtok_r(p, "/", &save)); p = NULL) seg[n++] = t;
    char *out = NULL;
    if (!path || path[0] != '/' || n < 4 || n > 5 || strcmp(seg[0], "api") != 0) {
    } else if (n == 4 && strcmp(seg[1], "organizations") == 0 && strcmp(seg[3], "overview") == 0) {
        if (hk_repo_id_valid(seg[2])) out = hk__asprintf("/api/organizations/%s/overview", seg[2]);
    } else if (strcmp(seg[n - 1], "refs") == 0) {
        int ti = -1;
        for (int i = 0; i < 4; i++)
            if (strcmp(seg[1], types[i]) == 0) ti = i;
        char *id = n == 5 ? hk__asprintf("%s/%s", seg[2], seg[3]) : hk__strdup(seg[2]);
        bool prs = false;
        for (const char *q = query; *q;) { /* include_prs=1|true; every other parameter is dropped */
            size_t l = strcspn(q, "&");
            if ((l == 13 && strncmp(q, "include_prs=1", 13) == 0) || (l == 16 && strncasecmp(q, "include_prs=true", 16) == 0))
                prs = true;
            q += l;
            if (*q == '&') q++;
        }
        if (ti >= 0 && id && hk_repo_id_valid(id)) out = hk__asprintf("/api/%s/%s/refs%s", types[ti], id, prs ? "?include_prs=1" : "");
        free(id);
    }
    free(path);
    return out;
}

static void pass_job(srv_server *srv, void *arg, up_result *res) {
    res->out = srv_up_passthrough(srv, arg, &res->body, &res->mark, &res->ans);
}

/* One piece: the coalescing of one pass-through request (memo, negative answers, budget, leader or
 * waiter, the upstream's answer) is one sequence whose every exit must leave the wait it entered. */
int srv_up_passthrough(srv_server *srv, const char *path_query, char **body, up_mark *mark, up_answer *ans) {
    srv_upstream *u = srv->up;
    *body = NULL;
    *mark = UP_HIT;
    char *pq = canon_passthrough(path_query);
    if (!pq) {
        answer(ans, 400, NULL, 0, "Invalid repo id or organization name");
        return 1;
    }
    int out = 1;
    unsigned st = 0;
    char code[48];
    const up_result *step = srv_up_step_done(pq);
    if (step) { /* done on a transfer thread for this request */
        *mark = step->mark;
        if (step->out) {
            *ans = step->ans;
            goto done;
        }
        if (step->body) { /* too large for the memo: kept for this request alone */
            *body = hk__strdup(step->body);
            out = *body ? 0 : 1;
            if (out) answer(ans, 502, NULL, 0, "Upstream unavailable");
            goto done;
        }
        goto from_memo;
    }
    if (srv_up_memo_get(u, pq, u->rev_ttl, body, &st, code)) {
        if (st == 200 && *body) {
            out = 0;
            goto done;
        }
        free(*body);
        *body = NULL;
        if (srv_up_memo_get(u, pq, u->neg_ttl, NULL, &st, code)) {
            neg_answer(ans, st, code);
            goto done;
        }
    }
    unsigned retry;
    if (!srv_up_client_may_miss(u, &retry)) { /* over budget: a remembered answer, else 429 */
        if (srv_up_memo_get(u, pq, -1, body, &st, code) && st == 200 && *body) {
            *mark = UP_STALE;
            out = 0;
        } else {
            free(*body);
            *body = NULL;
            over_budget(ans, retry);
        }
        goto done;
    }
    if (srv_up_deferring()) { /* a pool thread: the rest runs on a transfer thread */
        *mark = UP_NONE;
        out = srv_up_defer(pq, NULL, pass_job, hk__strdup(path_query), free, ans);
        goto done;
    }
    up_answer first;
    bool leader = srv_up_enter(u->waits, pq, srv_up_wait_s(u, 0), &u->stopping, &first);
    if (!leader) {
        *mark = UP_COALESCED;
        atomic_fetch_add(&srv->metrics.coalesced, 1);
        if (first.status) { /* the leader failed with nothing stale to give: so does this one */
            *ans = first;
            goto done;
        }
    } else {
        up_resp r;
        srv_up_resp_init(&r);
        r.lead_key = pq;
        unsigned backoff = 0;
        atomic_fetch_add(&srv->metrics.up_fetches, 1);
        srv_up_client_spend(u);
        int rc = srv_up_get(u, pq, &r, &backoff);
        if (rc == HK_OK && r.status == 200 && r.body.data) {
            srv_up_memo_put(u, pq, r.body.data, 200, NULL);
            *mark = UP_MISS;
            if (!srv_up_memo_fits(u, pq, r.body.len)) { /* too large to keep: this one only */
                *body = hk__sb_steal(&r.body);
                srv_up_resp_free(&r);
                srv_up_leave(u->waits, pq, NULL);
                out = *body ? 0 : 1;
                if (out) answer(ans, 502, NULL, 0, "Upstream unavailable");
                goto done;
            }
        } else if (rc == HK_OK && negative_status(r.status)) {
            srv_up_memo_put(u, pq, NULL, (unsigned)r.status, r.error_code);
        } else {
            atomic_fetch_add(&srv->metrics.up_errors, 1);
            if (backoff) atomic_fetch_add(&srv->metrics.up_rate_limited, 1);
            if (!srv_up_memo_get(u, pq, -1, body, &st, code) || st != 200 || !*body) {
                free(*body);
                *body = NULL;
                bool unavailable = srv_up_unavailable(rc, r.status);
                if (backoff) answer(ans, 429, NULL, backoff, "Upstream rate limit: retry later");
                else answer(ans, unavailable ? 503 : 502, NULL, unavailable ? 5 : 0, "Upstream unavailable");
                srv_up_resp_free(&r);
                srv_up_leave(u->waits, pq, ans);
                goto done;
            }
            *mark = UP_STALE;
            srv_up_resp_free(&r);
            srv_up_leave(u->waits, pq, NULL);
            hk_clear_error();
            out = 0;
            goto done;
        }
        srv_up_resp_free(&r);
        srv_up_leave(u->waits, pq, NULL);
    }
from_memo:
    if (srv_up_memo_get(u, pq, -1, body, &st, code) && st == 200 && *body) {
        out = 0;
        goto done;
    }
    free(*body);
    *body = NULL;
    if (st) neg_answer(ans, st, code);
    else answer(ans, 502, NULL, 0, "Upstream unavailable");
done:
    free(pq);
    return out;
}

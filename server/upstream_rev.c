/* Revisions from upstream: a branch or tag maps to a commit for the revision TTL (the ref file's
 * mtime is when it was last confirmed, so every process over the store agrees); a commit id is
 * immutable. One GET /api/T/{repo}/revision/{rev}?blobs=true gives the commit and, per file, the
 * etag and size that later downloads are checked against (the manifest).
 *
 * On an upstream failure a branch known before is served as it was (stale-if-error, marked "stale"
 * in the access log); 404/410 answers are remembered for the negative TTL; nothing else is cached.
 * Refs and organization overviews are passed through, memoised for the revision TTL. */
#include "server/srv_http.h"

#include "util/text.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define UP_MEMO_MAX 1024

typedef struct up_memo {
    char *key;
    char *body;      /* NULL for a negative answer */
    unsigned status; /* 200, or the remembered 404/410 */
    char code[48];
    double at;
} up_memo;

void hk_up_memo_free(hk_upstream *u) {
    for (size_t i = 0; i < u->n_memo; i++) {
        free(u->memo[i].key);
        free(u->memo[i].body);
    }
    free(u->memo);
    u->memo = NULL;
    u->n_memo = 0;
}

/* A copy of the memo for key if younger than max_age (or any age when max_age < 0). */
static bool memo_get(hk_upstream *u, const char *key, double max_age, char **body, unsigned *status, char code[48]) {
    bool found = false;
    double now = hk_up_now();
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->n_memo; i++) {
        up_memo *m = &u->memo[i];
        if (strcmp(m->key, key) != 0) continue;
        if (max_age < 0 || now - m->at < max_age) {
            found = true;
            if (body) *body = m->body ? hk__strdup(m->body) : NULL;
            if (status) *status = m->status;
            if (code) snprintf(code, 48, "%s", m->code);
        }
        break;
    }
    pthread_mutex_unlock(&u->mu);
    return found;
}

static void memo_put(hk_upstream *u, const char *key, const char *body, unsigned status, const char *code) {
    pthread_mutex_lock(&u->mu);
    up_memo *m = NULL;
    for (size_t i = 0; i < u->n_memo && !m; i++)
        if (strcmp(u->memo[i].key, key) == 0) m = &u->memo[i];
    if (!m && u->n_memo == UP_MEMO_MAX) { /* evict the oldest */
        size_t old = 0;
        for (size_t i = 1; i < u->n_memo; i++)
            if (u->memo[i].at < u->memo[old].at) old = i;
        m = &u->memo[old];
        free(m->key);
        free(m->body);
        memset(m, 0, sizeof *m);
    }
    if (!m) {
        up_memo *nv = realloc(u->memo, (u->n_memo + 1) * sizeof *nv);
        if (nv) {
            u->memo = nv;
            m = &u->memo[u->n_memo++];
            memset(m, 0, sizeof *m);
        }
    }
    if (m) {
        if (!m->key) m->key = hk__strdup(key);
        free(m->body);
        m->body = body ? hk__strdup(body) : NULL;
        m->status = status;
        snprintf(m->code, sizeof m->code, "%s", code ? code : "");
        m->at = hk_up_now();
    }
    pthread_mutex_unlock(&u->mu);
}

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

/* Open and flock (exclusive, blocking) <root>/.locks/<folder>/<name>.lock: the cross-process half of
 * coalescing. Returns the fd (-1 when locking is impossible: then the work is done unlocked). */
int hk_up_lock(const char *root, const char *repo_dir, const char *name) {
    const char *folder = strrchr(repo_dir, '/');
    folder = folder ? folder + 1 : repo_dir;
    char *dir = hk__asprintf("%s/.locks/%s", root, folder);
    char *path = dir ? hk__asprintf("%s/%s.lock", dir, name) : NULL;
    int fd = -1;
    if (path && hk__mkdirs(dir, 0755) == HK_OK) fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    hk_clear_error();
    if (fd >= 0)
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
        }
    free(dir);
    free(path);
    return fd;
}

void hk_up_unlock(int fd) {
    if (fd < 0) return;
    flock(fd, LOCK_UN);
    close(fd);
}

/* Is the store's knowledge of rev good enough without asking upstream? */
static bool rev_fresh(const char *root, const char *repo_dir, const char *rev, unsigned ttl, bool *known) {
    *known = false;
    if (hk__is_commit_id(rev)) {
        /* record_revision writes the manifest before the snapshot folder, and the store resolves a
         * commit by its folder: a manifest alone is another process between the two steps, whose
         * second step (idempotent) is taken here so that the commit resolves at once */
        char *snap = hk__asprintf("%s/snapshots/%s", repo_dir, rev);
        bool have = snap && hk__is_dir(snap);
        if (snap && !have && hk_manifest_exists(root, repo_dir, rev)) have = hk__mkdirs(snap, 0755) == HK_OK;
        free(snap);
        *known = have;
        return have; /* commit-addressed: immutable */
    }
    if (!hk__path_is_safe_relative(rev)) return false;
    char *ref = hk__asprintf("%s/refs/%s", repo_dir, rev);
    struct stat st;
    bool have = ref && stat(ref, &st) == 0 && S_ISREG(st.st_mode);
    free(ref);
    *known = have;
    if (!have) return false;
    return difftime(time(NULL), st.st_mtime) < (double)ttl;
}

/* Siblings of a revision answer into a listing (the manifest). */
static int siblings_listing(hk_listing *l, const cJSON *sibs) {
    const cJSON *s;
    cJSON_ArrayForEach(s, sibs) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(s, "rfilename");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(s, "size");
        const cJSON *blob = cJSON_GetObjectItemCaseSensitive(s, "blobId");
        const cJSON *lfs = cJSON_GetObjectItemCaseSensitive(s, "lfs");
        const cJSON *sha = lfs ? cJSON_GetObjectItemCaseSensitive(lfs, "sha256") : NULL;
        if (!cJSON_IsString(name) || !hk__path_is_safe_relative(name->valuestring) || strchr(name->valuestring, '\n') ||
            !cJSON_IsNumber(size) || size->valuedouble < 0 || size->valuedouble > 9.0e15)
            return hk__fail(HK_ERR_PROTOCOL, "upstream revision: a sibling without a safe name and a size");
        const char *etag = cJSON_IsString(sha) ? sha->valuestring : cJSON_IsString(blob) ? blob->valuestring : NULL;
        bool is_lfs = cJSON_IsString(sha);
        if (!etag || !hk__is_hex(etag, is_lfs ? 64 : 40))
            return hk__fail(HK_ERR_PROTOCOL, "upstream revision: %s has no usable blobId / lfs.sha256",
                            name->valuestring);
        char *p = hk__strdup(name->valuestring);
        int rc = p ? hk_listing_add_file(l, p, (uint64_t)size->valuedouble, etag, is_lfs) : HK_ERR_NOMEM;
        if (rc) {
            free(p);
            return rc;
        }
    }
    return HK_OK;
}

/* Record an upstream revision answer: manifest, snapshot folder, ref. */
static int record_revision(const char *root, const char *repo_dir, const char *rev, const char *json, char commit[65]) {
    cJSON *doc = cJSON_Parse(json);
    const cJSON *sha = doc ? cJSON_GetObjectItemCaseSensitive(doc, "sha") : NULL;
    const cJSON *sibs = doc ? cJSON_GetObjectItemCaseSensitive(doc, "siblings") : NULL;
    int rc = HK_OK;
    if (!cJSON_IsString(sha) || !hk__is_commit_id(sha->valuestring) || !cJSON_IsArray(sibs))
        rc = hk__fail(HK_ERR_PROTOCOL, "upstream revision answer without sha / siblings");
    else if (hk__is_commit_id(rev) && strcmp(rev, sha->valuestring) != 0)
        rc = hk__fail(HK_ERR_PROTOCOL, "upstream answered commit %s for commit %s", sha->valuestring, rev);
    if (rc == HK_OK) snprintf(commit, 65, "%s", sha->valuestring);
    if (rc == HK_OK && !hk_manifest_exists(root, repo_dir, commit)) {
        hk_listing l;
        memset(&l, 0, sizeof l);
        rc = siblings_listing(&l, sibs);
        if (rc == HK_OK) rc = hk_manifest_write(root, repo_dir, commit, &l);
        hk_listing_free(&l);
    }
    cJSON_Delete(doc);
    if (rc == HK_OK) {
        char *snap = hk__asprintf("%s/snapshots/%s", repo_dir, commit);
        rc = snap ? hk__mkdirs(snap, 0755) : HK_ERR_NOMEM;
        free(snap);
    }
    if (rc == HK_OK && !hk__is_commit_id(rev)) rc = hk_cache_write_ref(repo_dir, rev, commit);
    return rc;
}

/* After a failed refresh: the remembered 404, the back-off, the stale ref, a 503 (unavailable) or
 * a 502. */
static int after_failure(hk_upstream *u, const char *negkey, bool known, unsigned backoff, bool unavailable, up_mark *mark,
                         up_answer *ans) {
    unsigned st = 0;
    char code[48];
    if (memo_get(u, negkey, u->neg_ttl, NULL, &st, code)) {
        answer(ans, st, known_code(code), 0, "Not found upstream");
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

int hk_srv_up_revision(hk_server *srv, repo_ref *repo, const char *rev, up_mark *mark, up_answer *ans) {
    hk_upstream *u = srv->up;
    const char *root = hk_store_root(srv->store);
    *mark = UP_HIT;
    char *repo_dir = hk_store_repo_path(srv->store, repo->type, repo->id); /* checked id: inside the root */
    if (!repo_dir || !*rev) {
        hk_clear_error();
        free(repo_dir);
        return 0;
    }
    bool known;
    int out = 0;
    char *key = hk__asprintf("rev:%s/%s@%s", hk_repo_type_plural(repo->type), repo->id, rev);
    char *negkey = hk__asprintf("neg:%s/%s@%s", hk_repo_type_plural(repo->type), repo->id, rev);
    char lockname[80];
    char hex[65];
    hk__sha256_hex(hex, rev, strlen(rev)); /* "" when out of memory: the lock is then shared */
    snprintf(lockname, sizeof lockname, "rev-%.32s", hex);
    if (!key || !negkey) goto done;
    if (rev_fresh(root, repo_dir, rev, u->rev_ttl, &known)) goto done;
    unsigned st;
    char code[48];
    if (memo_get(u, negkey, u->neg_ttl, NULL, &st, code)) {
        answer(ans, st, known_code(code), 0, "Not found upstream");
        out = 1;
        goto done;
    }
    up_answer leader;
    if (!hk_up_enter(u->waits, key, &leader)) { /* another thread of this process asked upstream */
        atomic_fetch_add(&srv->metrics.coalesced, 1);
        *mark = UP_COALESCED;
        if (!leader.status || rev_fresh(root, repo_dir, rev, u->rev_ttl, &known)) goto done;
        if (known) out = after_failure(u, negkey, known, 0, leader.status == 503, mark, ans); /* stale, or a 404 */
        else *ans = leader, out = 1;
        goto done;
    }
    int fd = hk_up_lock(root, repo_dir, lockname);
    int rc = HK_OK;
    if (rev_fresh(root, repo_dir, rev, u->rev_ttl, &known)) { /* another process did it meanwhile */
        *mark = UP_COALESCED;
        atomic_fetch_add(&srv->metrics.coalesced, 1);
    } else {
        char *erev = hk__pct_encode(rev, false);
        char *pq = erev ? hk__asprintf("/api/%s/%s/revision/%s?blobs=true", hk_repo_type_plural(repo->type), repo->id,
                                       erev)
                        : NULL;
        free(erev);
        up_resp r;
        hk_up_resp_init(&r);
        unsigned backoff = 0;
        atomic_fetch_add(&srv->metrics.up_fetches, 1);
        rc = pq ? hk_up_get(u, pq, &r, &backoff) : HK_ERR_NOMEM;
        free(pq);
        if (rc == HK_OK && r.status == 200) {
            char commit[65];
            rc = record_revision(root, repo_dir, rev, r.body.data ? r.body.data : "", commit);
            if (rc == HK_OK) *mark = UP_MISS;
        } else if (rc == HK_OK && (r.status == 404 || r.status == 410)) {
            memo_put(u, negkey, NULL, 404, r.error_code);
            rc = HK_ERR_REVISION_NOT_FOUND;
        } else if (rc == HK_OK) {
            rc = hk__fail(HK_ERR_HTTP, "upstream answered HTTP %ld", r.status);
        }
        if (rc != HK_OK) {
            atomic_fetch_add(&srv->metrics.up_errors, 1);
            if (backoff) atomic_fetch_add(&srv->metrics.up_rate_limited, 1);
            out = after_failure(u, negkey, known, backoff, hk_up_unavailable(rc, r.status), mark, ans);
        }
        hk_up_resp_free(&r);
    }
    hk_up_unlock(fd);
    hk_up_leave(u->waits, key, out ? ans : NULL);
done:
    if (!out) {
        free(repo->dir);
        repo->dir = hk_store_repo_dir(srv->store, repo->type, repo->id);
    }
    free(key);
    free(negkey);
    free(repo_dir);
    return out;
}

int hk_srv_up_passthrough(hk_server *srv, const char *path_query, char **body, up_mark *mark, up_answer *ans) {
    hk_upstream *u = srv->up;
    *body = NULL;
    *mark = UP_HIT;
    unsigned st = 0;
    char code[48];
    if (memo_get(u, path_query, u->rev_ttl, body, &st, code)) {
        if (st == 200 && *body) return 0;
        free(*body);
        *body = NULL;
        if (memo_get(u, path_query, u->neg_ttl, NULL, &st, code)) {
            answer(ans, st, known_code(code), 0, "Not found upstream");
            return 1;
        }
    }
    up_answer first;
    bool leader = hk_up_enter(u->waits, path_query, &first);
    if (!leader) {
        *mark = UP_COALESCED;
        atomic_fetch_add(&srv->metrics.coalesced, 1);
        if (first.status) { /* the leader failed with nothing stale to give: so does this one */
            *ans = first;
            return 1;
        }
    } else {
        up_resp r;
        hk_up_resp_init(&r);
        unsigned backoff = 0;
        atomic_fetch_add(&srv->metrics.up_fetches, 1);
        int rc = hk_up_get(u, path_query, &r, &backoff);
        if (rc == HK_OK && r.status == 200 && r.body.data) {
            memo_put(u, path_query, r.body.data, 200, NULL);
            *mark = UP_MISS;
        } else if (rc == HK_OK && (r.status == 404 || r.status == 410)) {
            memo_put(u, path_query, NULL, 404, r.error_code);
        } else {
            atomic_fetch_add(&srv->metrics.up_errors, 1);
            if (backoff) atomic_fetch_add(&srv->metrics.up_rate_limited, 1);
            if (!memo_get(u, path_query, -1, body, &st, code) || st != 200 || !*body) {
                free(*body);
                *body = NULL;
                bool unavailable = hk_up_unavailable(rc, r.status);
                if (backoff) answer(ans, 429, NULL, backoff, "Upstream rate limit: retry later");
                else answer(ans, unavailable ? 503 : 502, NULL, unavailable ? 5 : 0, "Upstream unavailable");
                hk_up_resp_free(&r);
                hk_up_leave(u->waits, path_query, ans);
                return 1;
            }
            *mark = UP_STALE;
            hk_up_resp_free(&r);
            hk_up_leave(u->waits, path_query, NULL);
            hk_clear_error();
            return 0;
        }
        hk_up_resp_free(&r);
        hk_up_leave(u->waits, path_query, NULL);
    }
    if (memo_get(u, path_query, -1, body, &st, code) && st == 200 && *body) return 0;
    free(*body);
    *body = NULL;
    if (st == 404) answer(ans, 404, known_code(code), 0, "Not found upstream");
    else answer(ans, 502, NULL, 0, "Upstream unavailable");
    return 1;
}

/* The revision step's kept verdicts: "(repo, revision) is fresh" remembered in memory, so that a
 * warm request passes the step without the stats of upstream_rev.c's check (the snapshot folder,
 * the manifest's partial mark, a branch's ref file read).
 *
 * What keeps a verdict true (upstream_rev.c keeps one only when the file-system check said fresh):
 *   - the TTL: a branch's verdict ends when its ref file's mtime + TTL passes, as the check's would
 *     (another process's refresh only moves the mtime later); none outlives the TTL;
 *   - this process's own changes: a revision recorded or a manifest marked partial forgets the
 *     repo's verdicts (srv_up_verdict_forget), and a verdict checked before such a change is not
 *     kept after it (the generation read before the check);
 *   - another process's: a ref it moved is read by the store's own resolution, which follows the
 *     step; a snapshot or ref removed (prune, rm) makes that resolution fail, and a file the store
 *     lacks goes to the miss path: both drop the verdict and take the step again by the file system
 *     (http_upstream.c srv_route_rev, srv_route_retake); a repo folder removed is seen by the router,
 *     and no verdict is used without it. What no request of this process would notice (another
 *     process's partial mark, read by listings) is seen once a verdict is proven again: every
 *     verdict is, at least every UP_VERDICT_PROOF_MS.
 * A direct-mapped table (a collision costs the loser one check) under one mutex. */
#include "server/srv_upstream.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UP_VERDICT_SLOTS 1024
#define UP_VERDICT_PROOF_MS 1000

typedef struct up_verdict {
    char *id, *rev; /* NULL: an empty slot */
    hk_repo_type type;
    time_t fresh_until;   /* wall clock (a ref file's mtime + TTL); 0: no end of its own (a commit) */
    uint64_t proven_until; /* hk__now_ms(): proven by the file system again after this */
} up_verdict;

struct up_verdicts {
    pthread_mutex_t mu;
    uint64_t gen; /* bumped by every forget */
    up_verdict slot[UP_VERDICT_SLOTS];
};

static size_t slot_of(hk_repo_type type, const char *id, const char *rev) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)type; /* FNV-1a: the slot only; names are compared */
    for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull; /* no byte of a checked id or revision: "a/b"+"c" is not "a"+"b/c" */
    for (const char *p = rev; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (size_t)(h % UP_VERDICT_SLOTS);
}

static void slot_clear(up_verdict *v) {
    free(v->id);
    free(v->rev);
    memset(v, 0, sizeof *v);
}

int srv_up_verdicts_new(up_verdicts **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return hk__fail(HK_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    return HK_OK;
}

void srv_up_verdicts_free(up_verdicts *vs) {
    if (!vs) return;
    for (size_t i = 0; i < UP_VERDICT_SLOTS; i++) slot_clear(&vs->slot[i]);
    pthread_mutex_destroy(&vs->mu);
    free(vs);
}

uint64_t srv_up_verdict_gen(up_verdicts *vs) {
    pthread_mutex_lock(&vs->mu);
    uint64_t g = vs->gen;
    pthread_mutex_unlock(&vs->mu);
    return g;
}

bool srv_up_verdict_kept(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev) {
    size_t i = slot_of(type, id, rev);
    pthread_mutex_lock(&vs->mu);
    const up_verdict *v = &vs->slot[i];
    bool ok = v->id && v->type == type && strcmp(v->id, id) == 0 && strcmp(v->rev, rev) == 0 &&
              hk__now_ms() < v->proven_until && (!v->fresh_until || time(NULL) < v->fresh_until);
    pthread_mutex_unlock(&vs->mu);
    return ok;
}

void srv_up_verdict_keep(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev, time_t fresh_until,
                         uint64_t gen) {
    size_t i = slot_of(type, id, rev);
    char *cid = hk__strdup(id), *crev = hk__strdup(rev);
    if (!cid || !crev) { /* not kept: the next request checks again */
        free(cid);
        free(crev);
        hk_clear_error();
        return;
    }
    pthread_mutex_lock(&vs->mu);
    if (gen == vs->gen) { /* else the store changed since the check: its verdict may be old */
        slot_clear(&vs->slot[i]);
        vs->slot[i] = (up_verdict){.id = cid, .rev = crev, .type = type, .fresh_until = fresh_until,
                                   .proven_until = hk__now_ms() + UP_VERDICT_PROOF_MS};
        cid = crev = NULL;
    }
    pthread_mutex_unlock(&vs->mu);
    free(cid);
    free(crev);
}

void srv_up_verdict_forget(up_verdicts *vs, hk_repo_type type, const char *id) {
    pthread_mutex_lock(&vs->mu);
    vs->gen++;
    for (size_t i = 0; i < UP_VERDICT_SLOTS; i++)
        if (vs->slot[i].id && vs->slot[i].type == type && strcmp(vs->slot[i].id, id) == 0) slot_clear(&vs->slot[i]);
    pthread_mutex_unlock(&vs->mu);
}

void srv_up_verdict_drop(up_verdicts *vs, hk_repo_type type, const char *id, const char *rev) {
    size_t i = slot_of(type, id, rev);
    pthread_mutex_lock(&vs->mu);
    vs->gen++;
    up_verdict *v = &vs->slot[i];
    if (v->id && v->type == type && strcmp(v->id, id) == 0 && strcmp(v->rev, rev) == 0) slot_clear(v);
    pthread_mutex_unlock(&vs->mu);
}

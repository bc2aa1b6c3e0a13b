/* The names of a request, checked once where they enter (issue 21): the URL's segments (each
 * decoded once by the router, http_route.c), joined into a file path that hk__repo_path_valid
 * accepts, a repo id that hk_repo_id_valid accepts (its folder made inside the store), and a
 * revision under the project's one rule (hk__revision_valid) resolved against the store. Used by
 * the router and by every handler; they call nothing back. */
#include "util/text.h"
#include "server/srv_http.h"

#include <stdlib.h>
#include <string.h>

bool srv_seg_is(const seglist *s, size_t i, const char *lit) {
    return i < s->n && s->len[i] == strlen(lit) && memcmp(s->p[i], lit, s->len[i]) == 0;
}

char *srv_seg_decode(const seglist *s, size_t i) { return i < s->n ? hk__strdup(s->d[i]) : NULL; }


/* Decoded segments [at, at+k) joined with '/' (NULL when out of memory). */
char *srv_join_decoded(const seglist *s, size_t at, size_t k) {
    hk_strbuf sb;
    hk__sb_init(&sb);
    hk__sb_append(&sb, "");
    for (size_t i = at; i < at + k && i < s->n; i++) {
        if (i > at) hk__sb_append(&sb, "/");
        hk__sb_append(&sb, s->d[i]);
    }
    return hk__sb_steal(&sb);
}

/* An encoded '/' joins like a real one: huggingface_hub sends tree paths as "build%2Fvariant". The
 * joined result must be a checked path, so "..%2F.." is refused the same as "../..". */
char *srv_join_path(const seglist *s, size_t from, bool *bad) {
    *bad = false;
    char *out = srv_join_decoded(s, from, from < s->n ? s->n - from : 0);
    if (out && !(!*out || hk__repo_path_valid(out))) {
        free(out);
        *bad = true;
        return NULL;
    }
    return out;
}

void srv_repo_ref_free(repo_ref *r) {
    free(r->id);
    free(r->dir);
}

/* One part of a repo id as the Hub names them (decoded: an encoded '/' makes it invalid). */
static bool id_part_ok(const char *p) { return p && !strchr(p, '/') && hk_repo_id_valid(p); }

/* "org/name" when that repo exists or when the segment after "org" is not an action keyword;
 * else "name". Every id made here is checked (repo_ref's promise). */
repo_parse srv_parse_repo(repo_ref *out, srv_server *srv, const seglist *s, size_t at, hk_repo_type type,
                             const char *const *keywords) {
    memset(out, 0, sizeof *out);
    out->type = type;
    if (at >= s->n) return REPO_NONE;
    const char *a = s->d[at];
    const char *b = at + 1 < s->n ? s->d[at + 1] : NULL;
    if (!id_part_ok(a)) return REPO_INVALID;
    bool b_ok = id_part_ok(b);
    char *two = b_ok ? hk__asprintf("%s/%s", a, b) : NULL;
    char *dir2 = two ? srv_store_repo_dir(srv->store, type, two) : NULL;
    char *dir1 = dir2 ? NULL : srv_store_repo_dir(srv->store, type, a);
    bool b_is_kw = false;
    for (size_t k = 0; b && keywords[k]; k++)
        if (strcmp(b, keywords[k]) == 0) b_is_kw = true;
    repo_parse rc = REPO_OK;
    if (dir2) {
        out->id = two;
        out->dir = dir2;
        out->next = at + 2;
        two = NULL;
    } else if (dir1 || !b || b_is_kw) {
        out->id = hk__strdup(a);
        out->dir = dir1;
        out->next = at + 1;
    } else if (!b_ok) {
        rc = REPO_INVALID; /* "org/<not a name>": never looked up, here or upstream */
    } else {
        out->id = two;
        out->next = at + 2;
        two = NULL;
    }
    free(two);
    if (rc == REPO_OK && !out->id) rc = REPO_NONE;
    return rc;
}

/* The single decoded segment is tried first, then raw "refs/pr/1"-style joins of up to 4. */
int srv_resolve_rev_segs(char commit[65], char **rev_out, size_t *used, srv_store *store, const repo_ref *repo,
                         const seglist *s, size_t at, bool rest_is_rev) {
    *rev_out = NULL;
    *used = 0;
    if (at >= s->n) return hk__fail(HK_ERR_REVISION_NOT_FOUND, "no revision");
    size_t max_k = rest_is_rev ? s->n - at : (s->n - at > 4 ? 4 : s->n - at);
    size_t first_k = rest_is_rev ? max_k : 1;
    for (size_t k = first_k; k >= 1 && k <= max_k; k = rest_is_rev ? 0 : k + 1) {
        char *rev = srv_join_decoded(s, at, k);
        if (!rev) break;
        if (!hk__revision_valid(rev)) {
            if (k == first_k) { /* the revision as sent is no name at all */
                *rev_out = rev;
                return hk__fail(HK_ERR_INVALID_ARG, "invalid revision");
            }
            free(rev); /* a longer raw join is only a candidate */
            continue;
        }
        if (srv_store_resolve_rev_kept(commit, store, repo->dir, rev) == HK_OK) {
            free(*rev_out);
            *rev_out = rev;
            *used = k;
            return HK_OK;
        }
        if (k == first_k) *rev_out = rev; /* reported in the error */
        else free(rev);
        if (rest_is_rev) break;
    }
    hk_clear_error();
    if (!*rev_out) *rev_out = hk__strdup("");
    return hk__fail(HK_ERR_REVISION_NOT_FOUND, "revision not found");
}

/* Access control: bearer tokens from --token / --token-file and the namespaces each one grants.
 * Tokens are compared in constant time and wiped from memory when the server stops. */
#include "server/srv_http.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int srv_token_spec_parse(token_spec *t, const char *spec) {
    memset(t, 0, sizeof *t);
    const char *colon = strchr(spec, ':');
    size_t tl = colon ? (size_t)(colon - spec) : strlen(spec);
    if (tl == 0) return hk__fail(HK_ERR_INVALID_ARG, "empty token in token list");
    for (size_t i = 0; i < tl; i++)
        if ((unsigned char)spec[i] <= 0x20 || spec[i] == 0x7f)
            return hk__fail(HK_ERR_INVALID_ARG, "a token contains a space or control character");
    t->token = hk__strndup(spec, tl);
    if (!t->token) return hk__fail(HK_ERR_NOMEM, "out of memory");
    if (!colon) return HK_OK;
    /* a second ':' ends the scopes and names the permission (ids never hold ':') */
    const char *perm = strchr(colon + 1, ':');
    size_t scopes_len = perm ? (size_t)(perm - colon - 1) : strlen(colon + 1);
    if (perm) {
        if (strcmp(perm + 1, "write") == 0) t->write = true;
        else if (strcmp(perm + 1, "read") != 0)
            return hk__fail(HK_ERR_INVALID_ARG, "token permission '%s': use read or write", perm + 1);
        if (scopes_len == 0) return HK_OK; /* "TOKEN::write": every repo */
    }
    const char *p = colon + 1, *end = colon + 1 + scopes_len;
    size_t cap = 4;
    t->orgs = calloc(cap, sizeof *t->orgs);
    if (!t->orgs) return hk__fail(HK_ERR_NOMEM, "out of memory");
    while (p < end) {
        size_t n = strcspn(p, ",:");
        if (p + n > end) n = (size_t)(end - p);
        if (n) {
            if (t->n_orgs == cap) {
                cap *= 2;
                char **no = realloc(t->orgs, cap * sizeof *no);
                if (!no) return hk__fail(HK_ERR_NOMEM, "out of memory");
                t->orgs = no;
            }
            if (!(t->orgs[t->n_orgs] = hk__strndup(p, n))) return hk__fail(HK_ERR_NOMEM, "out of memory");
            t->n_orgs++;
            /* a scope is compared with checked ids: one that is no id could never match, say so */
            if (!hk_repo_id_valid(t->orgs[t->n_orgs - 1]))
                return hk__fail(HK_ERR_INVALID_ARG, "token scope '%s' is not a namespace or an org/name repo id",
                                t->orgs[t->n_orgs - 1]);
        }
        p += n;
        if (p < end && *p == ',') p++;
    }
    return HK_OK;
}

void srv_token_spec_free(token_spec *t) {
    if (t->token) {
        OPENSSL_cleanse(t->token, strlen(t->token));
        free(t->token);
    }
    for (size_t k = 0; k < t->n_orgs; k++) free(t->orgs[k]);
    free(t->orgs);
    memset(t, 0, sizeof *t);
}

auth_result srv_check_token(srv_server *srv, struct MHD_Connection *c, const token_spec **who) {
    *who = NULL;
    if (srv->n_tokens == 0) return AUTH_OK;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || !*h) return AUTH_MISSING;
    if (strncasecmp(h, "Bearer ", 7) != 0) return AUTH_INVALID;
    const char *t = h + 7;
    while (*t == ' ') t++;
    size_t tl = strlen(t);
    for (size_t i = 0; i < srv->n_tokens; i++) {
        size_t kl = strlen(srv->tokens[i].token);
        if (kl == tl && CRYPTO_memcmp(srv->tokens[i].token, t, tl) == 0) {
            *who = &srv->tokens[i];
            return AUTH_OK;
        }
    }
    return AUTH_INVALID;
}

static bool allows_ns(const token_spec *who, const char *ns, size_t n) {
    if (!who || !who->orgs) return true;
    for (size_t i = 0; i < who->n_orgs; i++)
        if (!strchr(who->orgs[i], '/') && strlen(who->orgs[i]) == n && strncasecmp(who->orgs[i], ns, n) == 0)
            return true;
    return false;
}

bool srv_token_allows(const token_spec *who, const repo_ref *repo) {
    const char *id = repo->id;
    /* repo_ref ids are checked where they are made; checked again so that no caller can hand an
     * unchecked "org/x/../../other" through (its namespace part would read "org") */
    if (!hk_repo_id_valid(id)) return false;
    if (!who || !who->orgs) return true;
    const char *slash = strchr(id, '/');
    if (slash && allows_ns(who, id, (size_t)(slash - id))) return true;
    for (size_t i = 0; i < who->n_orgs; i++) /* a repo scope: the whole id, as the Hub compares ids */
        if (strchr(who->orgs[i], '/') && strcasecmp(who->orgs[i], id) == 0) return true;
    /* a one-part id ("gpt2") is granted by a scope of that name, as before */
    return !slash && allows_ns(who, id, strlen(id));
}

bool srv_token_may_write(const token_spec *who, const repo_ref *repo) {
    return who && who->write && srv_token_allows(who, repo);
}

bool srv_token_allows_namespace(const token_spec *who, const char *ns) {
    if (allows_ns(who, ns, strlen(ns))) return true;
    size_t n = strlen(ns); /* a repo scope "ns/name" names its namespace too */
    for (size_t i = 0; i < who->n_orgs; i++)
        if (strncasecmp(who->orgs[i], ns, n) == 0 && who->orgs[i][n] == '/') return true;
    return false;
}

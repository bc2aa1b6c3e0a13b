/* Access control: bearer tokens from --token / --token-file and the namespaces each one grants.
 * Tokens are compared in constant time and wiped from memory when the server stops. */
#include "server/srv_http.h"

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int hk_srv_token_spec_parse(token_spec *t, const char *spec) {
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
    const char *p = colon + 1;
    size_t cap = 4;
    t->orgs = calloc(cap, sizeof *t->orgs);
    if (!t->orgs) return hk__fail(HK_ERR_NOMEM, "out of memory");
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n) {
            if (t->n_orgs == cap) {
                cap *= 2;
                char **no = realloc(t->orgs, cap * sizeof *no);
                if (!no) return hk__fail(HK_ERR_NOMEM, "out of memory");
                t->orgs = no;
            }
            if (!(t->orgs[t->n_orgs] = hk__strndup(p, n))) return hk__fail(HK_ERR_NOMEM, "out of memory");
            t->n_orgs++;
        }
        p += n;
        if (*p == ',') p++;
    }
    return HK_OK;
}

void hk_srv_token_spec_free(token_spec *t) {
    if (t->token) {
        OPENSSL_cleanse(t->token, strlen(t->token));
        free(t->token);
    }
    for (size_t k = 0; k < t->n_orgs; k++) free(t->orgs[k]);
    free(t->orgs);
    memset(t, 0, sizeof *t);
}

auth_result hk_srv_check_token(hk_server *srv, struct MHD_Connection *c, const token_spec **who) {
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

static bool allows_n(const token_spec *who, const char *ns, size_t n) {
    if (!who || !who->orgs) return true;
    for (size_t i = 0; i < who->n_orgs; i++)
        if (strlen(who->orgs[i]) == n && strncmp(who->orgs[i], ns, n) == 0) return true;
    return false;
}

bool hk_srv_token_allows(const token_spec *who, const char *repo_id) {
    const char *slash = strchr(repo_id, '/');
    return allows_n(who, repo_id, slash ? (size_t)(slash - repo_id) : strlen(repo_id));
}

bool hk_srv_token_allows_namespace(const token_spec *who, const char *ns) { return allows_n(who, ns, strlen(ns)); }

/* A loopback Hub mirror for the unit tests that talk to one: publish source trees into a store
 * and serve it with `hubkern serve`'s server. Header-only (static inline) so that only the tests
 * that include it need the server library. */
#ifndef HK_TEST_MIRROR_H
#define HK_TEST_MIRROR_H

#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "support.h"

/* Publish `src` as kernel repo `repo` on `branch` into `store`; commit_out (41 bytes) may be
 * NULL. opts, when given, supplies the optional fields (message, lfs_threshold, ...). */
static inline void hk_test_publish(const char *store, const char *src, const char *repo,
                                   const char *branch, const srv_publish_options *opts,
                                   char commit_out[41]) {
    srv_publish_options p;
    if (opts) p = *opts;
    else memset(&p, 0, sizeof p);
    p.src_dir = src;
    p.repo_id = repo;
    p.repo_type = HK_REPO_KERNEL;
    p.branch = branch;
    p.cache_dir = store;
    srv_publish_result r;
    CHECK_RC(srv_publish(&r, &p), HK_OK);
    if (commit_out) memcpy(commit_out, r.commit, 41);
}

/* Serve `store` on an ephemeral loopback port with `trusted_org` as a trusted publisher and write
 * "http://127.0.0.1:<port>" into endpoint. NULL (a failed CHECK) when the server did not start. */
static inline srv_server *hk_test_start_mirror(const char *store, const char *trusted_org,
                                              char *endpoint, size_t endpoint_size) {
    const char *trusted[] = {trusted_org};
    srv_config c;
    memset(&c, 0, sizeof c);
    c.cache_dir = store;
    c.host = "127.0.0.1";
    c.trusted_orgs = trusted;
    c.n_trusted_orgs = 1;
    srv_server *srv = NULL;
    CHECK_RC(srv_start(&srv, &c), HK_OK);
    if (srv) snprintf(endpoint, endpoint_size, "http://127.0.0.1:%u", srv_port(srv));
    return srv;
}

#endif

/* Staging of a pull (stage.c): the variant's links are made in <repo folder>/.hk-staging/<commit>.<rand>/,
 * at the same depth as snapshots/<commit>/ so that each relative link reads exactly as it will in
 * the snapshot; verified there; then published into snapshots/<commit>/build/<variant> by rename
 * under a per-variant lock. Nothing of a pull that fails is visible in the snapshot. Internal. */
#ifndef HK_CLIENT_STAGE_H
#define HK_CLIENT_STAGE_H

#include <stdbool.h>

typedef struct hk_stage {
    char *cache_root;
    char *repo_dir;
    char *commit;
    char *dir; /* <repo_dir>/.hk-staging/<commit>.<rand8> */
} hk_stage;

int hk__stage_open(hk_stage *s, const char *cache_root, const char *repo_dir, const char *commit);
/* <dir>/<path> → the relative link to blobs/<etag> that snapshots/<commit>/<path> would hold. */
int hk__stage_link(hk_stage *s, const char *path, const char *etag);
/* <dir>/build/<variant>. Caller frees. */
char *hk__stage_variant_dir(const hk_stage *s, const char *variant);
/* Move build/<variant> of the stage into snapshots/<commit>/build/<variant>. What was there (an
 * incomplete or damaged copy) is replaced; a copy that another process published meanwhile and
 * that `complete` (called under the lock with the snapshot's variant directory) accepts is kept. */
int hk__stage_publish(hk_stage *s, const char *variant, bool (*complete)(const char *variant_dir, void *ud), void *ud);
/* Remove the stage (whatever is left in it) and .hk-staging when empty. */
void hk__stage_discard(hk_stage *s);

#endif

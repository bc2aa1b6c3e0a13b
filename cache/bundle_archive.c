/* The libarchive helpers every part of the bundle code shares (bundle.c, bundle_create.c,
 * bundle_extract.c): its error message as ours, and a reader for any bundle format we write. Apart
 * from bundle.c so that the entry points and the runs they dispatch to do not call each other. */
#include "cache/bundle_internal.h"

#include <errno.h>

int hk__bundle_ar_fail(struct archive *ar, const char *what) {
    return hk__fail(HK_ERR_IO, "%s: %s", what, archive_error_string(ar) ? archive_error_string(ar) : "libarchive error");
}

int hk__bundle_open_reader(struct archive **out, const char *path) {
    int lrc = hk__archive_load();
    if (lrc) return lrc;
    struct archive *ar = archive_read_new();
    if (!ar) return hk__fail(HK_ERR_NOMEM, "out of memory");
    archive_read_support_format_tar(ar);
    archive_read_support_filter_gzip(ar);
    archive_read_support_filter_zstd(ar);
    archive_read_support_filter_bzip2(ar);
    archive_read_support_filter_xz(ar);
    if (archive_read_open_filename(ar, path, 1 << 16) != ARCHIVE_OK) {
        /* libarchive's own errno of the failure, not errno (left over from any earlier call) */
        int rc = hk__fail(archive_errno(ar) == ENOENT ? HK_ERR_NOT_FOUND : HK_ERR_PARSE, "cannot read bundle %s: %s", path,
                         archive_error_string(ar) ? archive_error_string(ar) : "not a tar archive");
        archive_read_free(ar);
        return rc;
    }
    *out = ar;
    return HK_OK;
}

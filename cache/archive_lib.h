/* libarchive, loaded on first use. Only `hubkern bundle` (and hk_bundle_*) needs it, and libarchive
 * brings libxml2, ICU (and with it libstdc++), lzma, lz4, bzip2 and acl: linked, every program
 * using libhubkern (shared or static) loaded those 11 libraries at start-up (bench/link_deps.md).
 * So the library never links it: hk__archive_load() dlopens libarchive.so.13 once, and the
 * bundle files call libarchive by its own names through the macros below, which route each call
 * to the pointer loaded. The prototypes come from archive.h itself (__typeof__), so that a pointer
 * cannot disagree with the function it points to. Private to the bundle files. */
#ifndef HK_CACHE_ARCHIVE_LIB_H
#define HK_CACHE_ARCHIVE_LIB_H

#include <archive.h>
#include <archive_entry.h>

#define HK__ARCHIVE_FUNCTIONS(X)                                                                   \
    X(archive_errno) X(archive_error_string) X(archive_read_new) X(archive_read_free) X(archive_read_next_header)   \
    X(archive_read_open_filename) X(archive_read_support_filter_gzip)                              \
    X(archive_read_support_filter_zstd) X(archive_read_support_filter_bzip2)                       \
    X(archive_read_support_filter_xz) X(archive_read_support_format_tar) X(archive_read_data)      \
    X(archive_write_new) X(archive_write_free) X(archive_write_close) X(archive_write_data)        \
    X(archive_write_header) X(archive_write_open_filename) X(archive_write_add_filter_gzip)        \
    X(archive_write_add_filter_zstd) X(archive_write_add_filter_bzip2) X(archive_write_add_filter_xz) \
    X(archive_write_set_format_pax_restricted)                                                     \
    X(archive_entry_new) X(archive_entry_free) X(archive_entry_filetype) X(archive_entry_pathname) \
    X(archive_entry_size) X(archive_entry_size_is_set) X(archive_entry_symlink)                    \
    X(archive_entry_set_filetype) X(archive_entry_set_mtime) X(archive_entry_set_pathname)         \
    X(archive_entry_set_perm) X(archive_entry_set_size) X(archive_entry_set_symlink)

typedef struct hk__archive_fns {
#define HK__ARCHIVE_MEMBER(name) __typeof__(name) *name;
    HK__ARCHIVE_FUNCTIONS(HK__ARCHIVE_MEMBER)
#undef HK__ARCHIVE_MEMBER
} hk__archive_fns;

/* Filled once by the first successful hk__archive_load(); read only after one returned HK_OK. */
extern hk__archive_fns hk__archive;

/* Load libarchive (once per process; thread-safe). HK_OK, or HK_ERR_RUNTIME_MISSING naming the
 * library and the package to install (HUBKERN_LIBARCHIVE_LIB, if set, is the one path tried). */
int hk__archive_load(void);

/* From here on, archive_x(...) in the bundle files calls the loaded libarchive (archive_lib.c, which
 * fills the table, sees the plain names). */
#ifndef HK__ARCHIVE_NO_REDIRECT
#define archive_errno (*hk__archive.archive_errno)
#define archive_error_string (*hk__archive.archive_error_string)
#define archive_read_new (*hk__archive.archive_read_new)
#define archive_read_free (*hk__archive.archive_read_free)
#define archive_read_next_header (*hk__archive.archive_read_next_header)
#define archive_read_open_filename (*hk__archive.archive_read_open_filename)
#define archive_read_support_filter_gzip (*hk__archive.archive_read_support_filter_gzip)
#define archive_read_support_filter_zstd (*hk__archive.archive_read_support_filter_zstd)
#define archive_read_support_filter_bzip2 (*hk__archive.archive_read_support_filter_bzip2)
#define archive_read_support_filter_xz (*hk__archive.archive_read_support_filter_xz)
#define archive_read_support_format_tar (*hk__archive.archive_read_support_format_tar)
#define archive_read_data (*hk__archive.archive_read_data)
#define archive_write_new (*hk__archive.archive_write_new)
#define archive_write_free (*hk__archive.archive_write_free)
#define archive_write_close (*hk__archive.archive_write_close)
#define archive_write_data (*hk__archive.archive_write_data)
#define archive_write_header (*hk__archive.archive_write_header)
#define archive_write_open_filename (*hk__archive.archive_write_open_filename)
#define archive_write_add_filter_gzip (*hk__archive.archive_write_add_filter_gzip)
#define archive_write_add_filter_zstd (*hk__archive.archive_write_add_filter_zstd)
#define archive_write_add_filter_bzip2 (*hk__archive.archive_write_add_filter_bzip2)
#define archive_write_add_filter_xz (*hk__archive.archive_write_add_filter_xz)
#define archive_write_set_format_pax_restricted (*hk__archive.archive_write_set_format_pax_restricted)
#define archive_entry_new (*hk__archive.archive_entry_new)
#define archive_entry_free (*hk__archive.archive_entry_free)
#define archive_entry_filetype (*hk__archive.archive_entry_filetype)
#define archive_entry_pathname (*hk__archive.archive_entry_pathname)
#define archive_entry_size (*hk__archive.archive_entry_size)
#define archive_entry_size_is_set (*hk__archive.archive_entry_size_is_set)
#define archive_entry_symlink (*hk__archive.archive_entry_symlink)
#define archive_entry_set_filetype (*hk__archive.archive_entry_set_filetype)
#define archive_entry_set_mtime (*hk__archive.archive_entry_set_mtime)
#define archive_entry_set_pathname (*hk__archive.archive_entry_set_pathname)
#define archive_entry_set_perm (*hk__archive.archive_entry_set_perm)
#define archive_entry_set_size (*hk__archive.archive_entry_set_size)
#define archive_entry_set_symlink (*hk__archive.archive_entry_set_symlink)
#endif

#endif

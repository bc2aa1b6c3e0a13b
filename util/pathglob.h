/* Repo-path globs (util/pathglob.c): huggingface_hub's include/exclude patterns, matched as its
 * filter_repo_objects does. */
#ifndef HK_UTIL_PATHGLOB_H
#define HK_UTIL_PATHGLOB_H

#include <stdbool.h>

/* Python's fnmatch.fnmatchcase(path, pattern) after '\' becomes '/' in both and a trailing '/' of
 * the pattern gets a '*': '*' matches any run of characters, '/' included. */
bool hk__glob_match(const char *pattern, const char *path);
/* filter_repo_objects for one path: it matches one of include (NULL or empty: every path does) and
 * none of exclude (NULL-terminated lists; NULL: none). */
bool hk__glob_select(const char *path, const char *const *include, const char *const *exclude);

#endif

/* OS / CPU detection (uname; the macOS version from SystemVersion.plist). */
#include "env/env_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

/* ---- OS / CPU ------------------------------------------------------------------------------- */

void hk__env_detect_os(hk_env *env) {
    struct utsname u;
    if (uname(&u) != 0) return;
    char os[sizeof u.sysname];
    size_t i = 0;
    for (; u.sysname[i] && i + 1 < sizeof os; i++) os[i] = (char)tolower((unsigned char)u.sysname[i]);
    os[i] = '\0';
    if (strncmp(os, "mingw", 5) == 0 || strncmp(os, "msys", 4) == 0 || strncmp(os, "cygwin", 6) == 0)
        strcpy(os, "windows");
    if (hk_env_set(env, "os", os) != HK_OK) hk_clear_error();
    if (hk_env_set(env, "cpu", u.machine) != HK_OK) hk_clear_error();

    if (strcmp(os, "darwin") == 0) {
        char *plist = hk__env_read_text("/System/Library/CoreServices/SystemVersion.plist");
        const char *k = plist ? strstr(plist, "<key>ProductVersion</key>") : NULL;
        const char *s = k ? strstr(k, "<string>") : NULL;
        const char *e = s ? strstr(s, "</string>") : NULL;
        if (e) {
            char *v = hk__strndup(s + 8, (size_t)(e - s - 8));
            if (v && hk_env_set(env, "macos_version", v) != HK_OK) hk_clear_error();
            free(v);
        }
        free(plist);
    }
}


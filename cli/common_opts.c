/* Option parsing and hub construction shared by the Hub commands (pull, versions, info, download),
 * and the one-line note they print when kernel-status.toml redirects: see cli/cli.h. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <string.h>

int hk_cli_hub_opt(hk_cli_hub_args *a, int argc, char **argv, int *i) {
    const char *o = argv[*i];
    const char **slot = strcmp(o, "--endpoint") == 0 ? &a->endpoint : strcmp(o, "--cache") == 0 ? &a->cache : NULL;
    if (slot) {
        if (*i + 1 >= argc) {
            fprintf(stderr, "hubkern: %s needs a value\n", o);
            return -1;
        }
        *slot = argv[++*i];
        return 1;
    }
    if (strcmp(o, "--offline") == 0) {
        a->offline = 1;
        return 1;
    }
    return 0;
}

int hk_cli_hub_open(hk_hub **out, const hk_cli_hub_args *a, hk_progress_fn progress, void *ud) {
    hk_hub_options o = HK_HUB_OPTIONS_INIT;
    o.endpoint = a->endpoint;
    o.cache_dir = a->cache;
    if (a->offline) o.offline = 1;
    o.progress = progress;
    o.progress_userdata = ud;
    return hk_hub_new(out, &o);
}

bool hk_cli_note_redirect(const char *asked, const char *repo, const char *what) {
    if (!asked || !repo || !*repo || strcmp(asked, repo) == 0) return false; /* "": a local kernel */
    fprintf(stderr, "hubkern: note: %s redirects to %s (kernel-status.toml)%s%s\n", asked, repo, what ? "; " : "",
            what ? what : "");
    return true;
}

/* hubkern trust-root: which Sigstore trusted_root.json pulls and loads use (path), what is in it
 * (show), and replacing it for this user (install FILE), e.g. by a fleet that mirrors the root. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: hubkern trust-root path | show [FILE] | install FILE\n\n"
               "path     print the trusted_root.json in use and where it comes from (HUBKERN_SIGSTORE_TRUST_ROOT,\n"
               "         installed, shipped with hubkern, build tree)\n"
               "show     summarise it (or FILE) as JSON: sha256, Fulcio CAs, transparency logs, CT logs, TSAs\n"
               "install  check that FILE loads as a trust root and install it for this user\n"
               "         ($XDG_CONFIG_HOME or ~/.config, /hubkern/sigstore/trusted_root.json); it then wins over\n"
               "         the shipped one (HUBKERN_SIGSTORE_TRUST_ROOT still wins over it)\n");
}

int hk_cmd_trust_root(int argc, char **argv);
int hk_cmd_trust_root(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "install") == 0) {
        if (argc != 3) {
            usage(stderr);
            return 2;
        }
        char *dest = NULL;
        if (hk_signature_trust_root_install(&dest, argv[2])) return hk_cli_report_error("trust-root install");
        printf("%s\n", dest);
        hk_free(dest);
        return 0;
    }
    if ((strcmp(cmd, "path") != 0 && strcmp(cmd, "show") != 0) || argc > 3 || (argc == 3 && cmd[0] == 'p')) {
        usage(stderr);
        return 2;
    }
    char *path = NULL;
    const char *source = "argument";
    if (argc == 3) path = strdup(argv[2]);
    else if (hk_signature_trust_root_path(&path, &source, NULL)) return hk_cli_report_error("trust-root");
    if (cmd[0] == 'p') {
        printf("%s\t%s\n", path, source);
        hk_free(path);
        return 0;
    }
    char *json = NULL;
    int rc = hk_signature_trust_root_describe(&json, path);
    if (rc == HK_OK) printf("%s\n", json);
    hk_free(json);
    if (argc == 3) free(path);
    else hk_free(path);
    return rc ? hk_cli_report_error("trust-root show") : 0;
}

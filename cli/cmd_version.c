/* hubkern version (also -V / --version): the CLI's and the library's versions. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>

static const hk_cli_opt k_version_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print {\"hubkern\": CLI version, \"library\": libhubkern version}", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
const hk_cli_spec hk_spec_version = {
    .name = "version",
    .summary = "print the hubkern version (also hubkern -V / --version)",
    .synopsis = "hubkern version [--json]",
    .tables = {k_version_opts},
    .json = 1,
};

int hk_cmd_version(int argc, char **argv) {
    hk_cli_args a;
    int rc = hk_cli_parse(&a, &hk_spec_version, argc, argv);
    if (rc || a.help) {
        if (!rc) hk_cli_print_help(&hk_spec_version);
        hk_cli_args_free(&a);
        return rc;
    }
    if (a.npos) rc = hk_cli_usage_error("unexpected argument '%s'", a.pos[0]);
    else if (hk_cli_json()) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "hubkern", HK_CLI_VERSION);
        cJSON_AddStringToObject(j, "library", hk_version());
        hk_cli_print_json(j);
    } else {
        printf("hubkern %s (libhubkern %s)\n", HK_CLI_VERSION, hk_version());
    }
    hk_cli_args_free(&a);
    return rc;
}

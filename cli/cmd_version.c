/* hubkern version (also -V / --version): the CLI's and the library's versions. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>

static const cli_opt k_version_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print {\"hubkern_version\": ..., \"library_version\": ...} (docs/json.md)", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};
const cli_spec cli_spec_version = {
    .name = "version",
    .summary = "print the hubkern version (also hubkern -V / --version)",
    .synopsis = "hubkern version [--json]",
    .tables = {k_version_opts},
    .json = 1,
};

int cli_cmd_version(int argc, char **argv) {
    cli_args a;
    int rc = cli_parse(&a, &cli_spec_version, argc, argv);
    if (rc || a.help) {
        if (!rc) cli_print_help(&cli_spec_version);
        cli_args_free(&a);
        return rc;
    }
    if (a.npos) rc = cli_usage_error("unexpected argument '%s'", a.pos[0]);
    else if (cli_json()) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "hubkern_version", HK_CLI_VERSION);
        cJSON_AddStringToObject(j, "library_version", hk_version());
        cli_print_json(j);
    } else {
        printf("hubkern %s (libhubkern %s)\n", HK_CLI_VERSION, hk_version());
    }
    cli_args_free(&a);
    return rc;
}

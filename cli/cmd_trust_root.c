/* hubkern trust-root: which Sigstore trusted_root.json pulls and loads use (path), what is in it
 * (show), and replacing it for this user (install FILE), e.g. by a fleet that mirrors the root. */
#include "cli/cli.h"

#include <hubkern.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cli_opt k_opts[] = {
    {HK_OPT_FLAG, "json", 0, NULL, "print the result (or the error) as one JSON object on stdout", NULL, NULL},
    {HK_OPT_END, NULL, 0, NULL, NULL, NULL, NULL},
};

const cli_spec cli_spec_trust_root = {
    .name = "trust-root",
    .summary = "show, locate or install the Sigstore trusted_root.json",
    .synopsis = "hubkern trust-root path | show [FILE] | install FILE",
    .description =
        "path     print the trusted_root.json in use and where it comes from (HUBKERN_SIGSTORE_TRUST_ROOT,\n"
        "         installed, or shipped: <prefix>/share/hubkern/sigstore beside hubkern's bin and lib)\n"
        "show     summarise it (or FILE) as JSON: sha256, Fulcio CAs, transparency logs, CT logs, TSAs\n"
        "install  check that FILE loads as a trust root and install it for this user\n"
        "         ($XDG_CONFIG_HOME or ~/.config, /hubkern/sigstore/trusted_root.json); it then wins over\n"
        "         the shipped one (HUBKERN_SIGSTORE_TRUST_ROOT still wins over it)\n",
    .tables = {k_opts},
    .subcommands = "path show install",
    .json = 1,
};

/* --json: {"path", "source"} plus, for show, the summary's own fields (docs/json.md) */
static void print_json(const char *path, const char *source, const char *summary) {
    cJSON *j = summary ? cJSON_Parse(summary) : cJSON_CreateObject();
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        j = cJSON_CreateObject();
    }
    cJSON_DeleteItemFromObject(j, "path");
    cJSON_DeleteItemFromObject(j, "source");
    cJSON_AddStringToObject(j, "path", path);
    if (source) cJSON_AddStringToObject(j, "source", source);
    else cJSON_AddNullToObject(j, "source");
    cli_print_json(j);
}

int cli_cmd_trust_root(int argc, char **argv) {
    cli_args args;
    int prc = cli_parse(&args, &cli_spec_trust_root, argc, argv);
    if (prc || args.help) {
        if (!prc) cli_print_help(&cli_spec_trust_root);
        cli_args_free(&args);
        return prc;
    }
    /* the subcommand and its argument, as positionals (strings live in argv) */
    size_t npos = args.npos;
    char *pos[3] = {NULL, NULL, NULL};
    for (size_t i = 0; i < npos && i < 3; i++) pos[i] = args.pos[i];
    cli_args_free(&args);
    if (npos == 0) return cli_usage_error("missing the subcommand: path, show or install");
    argc = (int)npos + 1;
    char *sub_argv[4] = {NULL, pos[0], pos[1], pos[2]};
    argv = sub_argv;
    const char *cmd = argv[1];
    static char name[48];
    if (!strcmp(cmd, "install") || !strcmp(cmd, "path") || !strcmp(cmd, "show")) { /* "hubkern trust-root show: ..." */
        snprintf(name, sizeof name, "trust-root %s", cmd);
        cli_set_command(name);
    }
    if (strcmp(cmd, "install") == 0) {
        if (argc != 3) return cli_usage_error("install takes one FILE");
        char *dest = NULL;
        if (hk_signature_trust_root_install(&dest, argv[2])) return cli_report_error(NULL);
        if (cli_json()) print_json(dest, "installed", NULL);
        else printf("%s\n", dest);
        hk_free(dest);
        return 0;
    }
    if (strcmp(cmd, "path") != 0 && strcmp(cmd, "show") != 0)
        return cli_usage_error("unknown subcommand '%s' (path, show or install)", cmd);
    if (argc > 3 || (argc == 3 && cmd[0] == 'p')) return cli_usage_error("unexpected argument '%s'", argv[argc - 1]);
    char *path = NULL;
    const char *source = "argument";
    if (argc == 3) path = strdup(argv[2]);
    else if (hk_signature_trust_root_path(&path, &source, NULL)) return cli_report_error(NULL);
    if (cmd[0] == 'p') {
        if (cli_json()) print_json(path, source, NULL);
        else printf("%s\t%s\n", path, source);
        hk_free(path);
        return 0;
    }
    char *json = NULL;
    int rc = hk_signature_trust_root_describe(&json, path);
    if (rc == HK_OK && cli_json()) print_json(path, source, json);
    else if (rc == HK_OK) printf("%s\n", json);
    hk_free(json);
    if (argc == 3) free(path);
    else hk_free(path);
    return rc ? cli_report_error(NULL) : 0;
}

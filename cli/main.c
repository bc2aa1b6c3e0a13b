/* hubkern: entry point, subcommand dispatch (the table is in commands.c), `hubkern help [CMD]`,
 * -V/--version and the "did you mean" for a mistyped command. */
#include "cli/cli.h"
#include "cli/help.h"

#include <hubkern.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: hubkern <command> [options]\n\ncommands:\n");
    char line[512];
    for (size_t i = 0; i <= cli_ncommands; i++) { /* the summaries continue in their column */
        const cli_spec *c = i < cli_ncommands ? cli_commands[i].spec : NULL;
        snprintf(line, sizeof line, "  %-16s %s", c ? c->name : "help",
                 c ? c->summary : "describe a command (hubkern help CMD = hubkern CMD --help)");
        cli_print_wrapped(f, line, "", "", 19);
    }
    fprintf(f, "\n'hubkern <command> --help' describes each command's options; -V prints the\nversion.\n");
}

static const cli_command_def *find(const char *name) {
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strcmp(name, cli_commands[i].spec->name) == 0) return &cli_commands[i]; /* "trust-root" */
    return NULL;
}

/* --json anywhere among the arguments (before a "--") */
static bool wants_json(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--json") == 0) return true;
    return false;
}

static int unknown_command(const char *name) {
    const char *best = NULL;
    size_t bestd = 3;
    for (size_t i = 0; i < cli_ncommands; i++) {
        size_t d = cli_edit_distance(name, cli_commands[i].spec->name);
        /* a prefix of one command counts as close too ("ver" -> versions is not: two match) */
        if (d < bestd) bestd = d, best = cli_commands[i].spec->name;
    }
    /* with --json the error is a JSON document too (cli_usage_error), command "hubkern" */
    cli_set_command(NULL);
    if (best) return cli_usage_error("unknown command '%s' (did you mean '%s'?)", name, best);
    return cli_usage_error("unknown command '%s'", name);
}

static int help(int argc, char **argv) {
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    if (argv[1][0] == '-') return cli_help_generate(argc, argv);
    const cli_command_def *c = find(argv[1]);
    if (!c) return unknown_command(argv[1]);
    if (wants_json(argc, argv)) return cli_help_json(c->spec); /* command "help" */
    cli_set_command(c->spec->name);
    if (argc > 2) return cli_usage_error("unexpected argument '%s' (hubkern help [COMMAND] [--json])", argv[2]);
    return cli_print_help(c->spec);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (wants_json(argc, argv)) cli_set_json(1); /* an unknown command's error is JSON too */
    if (strcmp(name, "help") == 0) {
        cli_set_command("help");
        return help(argc - 1, argv + 1);
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        cli_set_command("version");
        return cli_cmd_version(argc - 1, argv + 1);
    }
    if (name[0] == '-') {
        static const char *const top[] = {"--version", "--help"};
        const char *best = NULL;
        for (size_t i = 0; i < 2 && strlen(name) > 2; i++) /* a prefix (--vers) or a typo (--verison) */
            if (strncmp(top[i], name, strlen(name)) == 0 || cli_edit_distance(name, top[i]) <= 2) best = top[i];
        if (best) return cli_usage_error("unrecognized option '%s' (did you mean %s?)", name, best);
        return cli_usage_error("unrecognized option '%s' before the command", name);
    }
    const cli_command_def *c = find(name);
    if (!c) return unknown_command(name);
    cli_set_command(c->spec->name);
    cli_set_verbosity(0, 0); /* HUBKERN_VERBOSE until the command's -v/-q are parsed */
    /* libcurl's global state, set up before any thread starts (the server's included) */
    if (hk_init() != HK_OK) return cli_report_error(NULL);
    int rc = c->run(argc - 1, argv + 1);
    fflush(stdout);
    hk_shutdown();
    return rc;
}

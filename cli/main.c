/* hubkern: entry point, subcommand dispatch (the table is in commands.c), `hubkern help [CMD]`,
 * -V/--version and the "did you mean" for a mistyped command. */
#include "cli/cli.h"
#include "cli/help.h"

#include <hubkern.h>

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: hubkern <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < cli_ncommands; i++)
        fprintf(f, "  %-16s %s\n", cli_commands[i].spec->name, cli_commands[i].spec->summary);
    fprintf(f, "  %-16s %s\n", "help", "describe a command (hubkern help CMD = hubkern CMD --help)");
    fprintf(f, "\n'hubkern <command> --help' describes each command's options; -V prints the version.\n");
}

static const cli_command_def *find(const char *name) {
    for (size_t i = 0; i < cli_ncommands; i++)
        if (strcmp(name, cli_commands[i].spec->name) == 0) return &cli_commands[i]; /* "trust-root" */
    return NULL;
}

static int unknown_command(const char *name) {
    const char *best = NULL;
    size_t bestd = 3;
    for (size_t i = 0; i < cli_ncommands; i++) {
        size_t d = cli_edit_distance(name, cli_commands[i].spec->name);
        /* a prefix of one command counts as close too ("ver" -> versions is not: two match) */
        if (d < bestd) bestd = d, best = cli_commands[i].spec->name;
    }
    if (best) fprintf(stderr, "hubkern: unknown command '%s' (did you mean '%s'?)\n", name, best);
    else fprintf(stderr, "hubkern: unknown command '%s'\n", name);
    fprintf(stderr, "try 'hubkern --help'\n");
    return 2;
}

static int help(int argc, char **argv) {
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    if (argv[1][0] == '-') return cli_help_generate(argc, argv);
    const cli_command_def *c = find(argv[1]);
    if (!c) return unknown_command(argv[1]);
    cli_set_command(c->spec->name);
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
    if (strcmp(name, "help") == 0) return help(argc - 1, argv + 1);
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        cli_set_command("version");
        return cli_cmd_version(argc - 1, argv + 1);
    }
    if (name[0] == '-') {
        fprintf(stderr, "hubkern: unrecognized option '%s' before the command\ntry 'hubkern --help'\n", name);
        return 2;
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

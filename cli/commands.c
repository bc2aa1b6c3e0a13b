/* The command table: every `hubkern <command>`, its entry point and its spec (cli.h lists them).
 * Apart from main.c, which dispatches through it, and help.c, which prints the man page and the
 * completions from it, so that neither calls the other for it. */
#include "cli/cli.h"

#include <stddef.h>

const cli_command_def cli_commands[] = {
#define HK_ENTRY(name) {#name, cli_cmd_##name, &cli_spec_##name},
    HK_COMMANDS(HK_ENTRY)
};
const size_t cli_ncommands = sizeof cli_commands / sizeof cli_commands[0];

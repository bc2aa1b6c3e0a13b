/* The command table: every `hubkern <command>`, its entry point and its spec (cli.h lists them).
 * Apart from main.c, which dispatches through it, and help.c, which prints the man page and the
 * completions from it, so that neither calls the other for it. */
#include "cli/cli.h"

#include <stddef.h>

const hk_command hk_cli_commands[] = {
#define HK_ENTRY(name) {#name, hk_cmd_##name, &hk_spec_##name},
    HK_COMMANDS(HK_ENTRY)
};
const size_t hk_cli_ncommands = sizeof hk_cli_commands / sizeof hk_cli_commands[0];

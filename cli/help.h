/* Documents generated from the command specs (cli/help.c): `hubkern help --all-json`,
 * `hubkern help --man` (roff for hubkern(1)) and `hubkern help --completion bash|zsh`. The build
 * runs these to produce the installed man page and completion scripts (cli/CMakeLists.txt). */
#ifndef HK_CLI_HELP_H
#define HK_CLI_HELP_H

#include "cli/args.h"

/* argv[0] is "help"; argv[1] the generator option. Returns the exit status. */
int cli_help_generate(int argc, char **argv);
/* The specs as one JSON document ({"commands": [...]}): every command's, or only that one's. */
int cli_help_json(const cli_spec *only);

#endif

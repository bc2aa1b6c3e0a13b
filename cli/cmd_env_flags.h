/* Options shared by `hubkern env` and `hubkern variants`: how to detect the machine, and how to
 * describe (part of) another one. */
#ifndef HK_CLI_ENV_FLAGS_H
#define HK_CLI_ENV_FLAGS_H

#include "cli/args.h"

#include <hubkern.h>

#include <stdbool.h>

/* option tables: "detection options" and "system options" */
extern const cli_opt cli_env_detect_opts[];
extern const cli_opt cli_env_system_opts[];

typedef struct cli_env_flags {
    hk_env_options opts;
    bool blank;           /* --blank: start from nothing instead of detecting */
    char **sets;          /* "key=value" pairs, applied in order after detection */
    int nsets;
} cli_env_flags;

void cli_env_flags_init(cli_env_flags *fl);
void cli_env_flags_free(cli_env_flags *fl);
/* Read the detection and system options out of parsed arguments, in the order given. Returns 0,
 * or 2 after a usage error. */
int cli_env_flags_get(cli_env_flags *fl, const cli_args *a);
/* Detect (or start blank), then apply the flags. */
int cli_env_flags_build(hk_env **out, const cli_env_flags *fl);

#endif

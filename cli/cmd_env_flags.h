/* Options shared by `hubkern env` and `hubkern variants`: how to detect the machine, and how to
 * describe (part of) another one. */
#ifndef HK_CLI_ENV_FLAGS_H
#define HK_CLI_ENV_FLAGS_H

#include <hubkern.h>

#include <stdbool.h>

typedef struct hk_cli_env_flags {
    hk_env_options opts;
    bool blank;           /* --blank: start from nothing instead of detecting */
    char **sets;          /* "key=value" pairs, applied in order after detection */
    int nsets;
} hk_cli_env_flags;

void hk_cli_env_flags_init(hk_cli_env_flags *fl);
void hk_cli_env_flags_free(hk_cli_env_flags *fl);
/* Try to consume argv[i] (and its value). Returns the number of arguments used, 0 if argv[i] is
 * not an environment flag, -1 on a usage error (printed). */
int hk_cli_env_flags_parse(hk_cli_env_flags *fl, int argc, char **argv, int i);
/* Detect (or start blank), then apply the flags. */
int hk_cli_env_flags_build(hk_env **out, const hk_cli_env_flags *fl);
const char *hk_cli_env_flags_help(void);

#endif

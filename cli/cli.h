/* The hubkern command line: one file per subcommand, each `int hk_cmd_<name>(int argc, char **argv)`
 * returning the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef HK_CLI_H
#define HK_CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef struct hk_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} hk_command;

/* Print "hubkern: <hk_last_error()>" (with the code name) to stderr and return 1. */
int hk_cli_report_error(const char *what);
/* Route the library's log callback to stderr at the given verbosity. */
void hk_cli_install_logger(int verbosity);

#endif

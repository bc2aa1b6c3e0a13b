/* The one argument parser of the hubkern command line (cli/args.c) and the command specs it reads.
 *
 * Every command describes itself in a static cli_spec: synopsis, description and option tables.
 * The same spec drives parsing (`--opt value`, `--opt=value`, `-x value`, `-xVALUE`, clustered
 * short flags, `--` ends the options), `hubkern CMD --help`, `hubkern help CMD`, the man page and
 * the shell completions (cli/help.c), so the four never disagree. */
#ifndef HK_CLI_ARGS_H
#define HK_CLI_ARGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum cli_opt_kind {
    HK_OPT_END = 0, /* terminates a table */
    HK_OPT_FLAG,    /* --json; repeating it is harmless */
    HK_OPT_COUNT,   /* -v -v: counted */
    HK_OPT_VALUE,   /* --version N: one value; given twice is an error */
    HK_OPT_LIST,    /* --set K=V: repeatable, every value kept in order */
} cli_opt_kind;

typedef struct cli_opt {
    cli_opt_kind kind;
    const char *name;    /* long name without "--" */
    char short_name;     /* 0: none */
    const char *metavar; /* value placeholder in help (VALUE/LIST) */
    const char *help;    /* one line (may wrap in the help output) */
    const char *alias;   /* a second long name for the same option (e.g. "cache" for "cache-dir") */
    const char *choices; /* "a|b|c" offered by the shell completion; NULL: a file or free text */
} cli_opt;

#define HK_CLI_MAX_TABLES 4

typedef struct cli_spec {
    const char *name;        /* "pull", or "cache" for a command with subcommands */
    const char *summary;     /* one line for the command list */
    const char *synopsis;    /* usage lines without the leading "usage: " (several separated by \n) */
    const char *description; /* paragraphs after the synopsis (may be NULL) */
    const cli_opt *tables[HK_CLI_MAX_TABLES]; /* option tables, NULL-terminated list */
    const char *const *table_titles;            /* section title per table (NULL: "options") */
    const char *conflicts;   /* "version,revision;variant,all-variants": pairs that exclude each other */
    const char *subcommands; /* "ls verify prune rm" (completion; the command parses them) */
    int json;                /* 1: the command takes --json (the JSON-on-stdout rule applies) */
} cli_spec;

/* Options every command takes (help, verbose, quiet); listed under "common options". */
extern const cli_opt cli_common_opts[];

typedef struct cli_occurrence {
    const cli_opt *opt;
    const char *value; /* NULL for flags */
} cli_occurrence;

typedef struct cli_args {
    const cli_spec *spec;
    char **pos; /* positional arguments in order (borrowed from argv) */
    size_t npos;
    cli_occurrence *occ; /* every option given, in order */
    size_t nocc;
    int help; /* -h/--help was given: the caller prints the help and returns 0 */
} cli_args;

/* Parse argv[1..argc) (argv[0] is the command name) against spec. Returns 0 on success, or 2 after
 * printing one line naming the problem and "try 'hubkern CMD --help'" (and, under --json, the JSON
 * error object). Sets the CLI's verbosity, quiet and JSON state (cli/cli.h) from -v, -q, --json. */
int cli_parse(cli_args *out, const cli_spec *spec, int argc, char **argv);
void cli_args_free(cli_args *a);

/* The value of a VALUE option (the last LIST value), NULL when absent. name must be in the spec. */
const char *cli_str(const cli_args *a, const char *name);
/* How often a FLAG/COUNT/VALUE/LIST option was given. */
int cli_count(const cli_args *a, const char *name);
/* A non-negative integer value (at most max) into *out; leaves *out when absent. Returns 0, or 2
 * after a usage error naming the option. */
int cli_int(const cli_args *a, const char *name, long max, int *out);

/* Print "hubkern CMD: MESSAGE" and "try 'hubkern CMD --help'" on stderr (and, under --json, the
 * JSON error object with code HK_ERR_INVALID_ARG on stdout); returns 2. */
int cli_usage_error(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* --help fits a terminal of this many columns, whatever the specs' lines say (cli/wrap.h) */
#define HK_HELP_WIDTH 80

/* Write the help of spec (synopsis, description, options) to stdout, every line broken to
 * HK_HELP_WIDTH. Returns 0. */
int cli_print_help(const cli_spec *spec);
/* Write text to f, each paragraph or "label  text" entry (cli_wrap_block) broken to HK_HELP_WIDTH
 * columns, continuations under the label's text or the line's indent, at least min_hang past it;
 * first_prefix goes before the first block, later_prefix (as wide) before the others. */
void cli_print_wrapped(FILE *f, const char *text, const char *first_prefix, const char *later_prefix,
                       size_t min_hang);

/* Levenshtein distance of two short strings (for "did you mean"). */
size_t cli_edit_distance(const char *a, const char *b);

#endif

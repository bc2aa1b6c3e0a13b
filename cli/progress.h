/* The download progress display of pull and download (cli/progress.c). */
#ifndef HK_CLI_PROGRESS_H
#define HK_CLI_PROGRESS_H

#include <hubkern.h>

#include <stdint.h>

typedef enum cli_progress_mode {
    HK_PROGRESS_AUTO = 0, /* a bar when stderr is a terminal, nothing otherwise */
    HK_PROGRESS_BAR,      /* --progress=bar: a bar even when stderr is not a terminal */
    HK_PROGRESS_PLAIN,    /* --progress=plain: one plain line every few seconds */
    HK_PROGRESS_NONE,     /* --progress=none, -q, --json or HF_HUB_DISABLE_PROGRESS_BARS */
} cli_progress_mode;

typedef struct cli_progress {
    cli_progress_mode mode;
    int drawn;             /* a bar line is on the screen (needs a newline or clearing) */
    uint64_t start_ms, last_ms, done_bytes, total_bytes;
    uint32_t done_files, total_files, active_files;
    double speed;          /* bytes/s: the average since the first byte, then smoothed */
    int speed_ready;       /* enough time and bytes have passed for speed and ETA to mean something */
    uint64_t first_ms, base_bytes; /* the first callback's bytes (resumed ones), when more began to arrive */
    uint64_t speed_ms, speed_bytes; /* the start of the current smoothing window */
    char item[256];        /* the file streaming now (of several: the one with the most to come), or "" */
} cli_progress;

/* Parse --progress (NULL: auto) into a mode, applying -q, --json and HF_HUB_DISABLE_PROGRESS_BARS.
 * Returns 0, or 2 after a usage error for an unknown value. */
int cli_progress_init(cli_progress *p, const char *arg);
/* The hk_progress_fn to hand to the library (ud = the cli_progress). It also returns non-zero
 * once SIGINT arrived, so that a download stops at once (HK_ERR_CANCELLED). */
int cli_progress_cb(void *ud, const hk_progress *pr);
/* End the display (a newline after a bar). */
void cli_progress_done(cli_progress *p);
/* Erase a bar line before some other message is written to stderr (no-op without one). */
void cli_progress_clear(void);

/* Install the SIGINT and SIGTERM handler of a long command: the first signal sets a flag that the
 * progress callback turns into a cancel; a second one ends the process at once (exit 128 + signal). */
void cli_catch_interrupt(void);
/* The signal that interrupted the command (SIGINT, SIGTERM), or 0. */
int cli_interrupted(void);
/* The exit status of a command that stopped: 128 + the signal (130 Ctrl-C, 143 SIGTERM) when one
 * interrupted it, else rc. */
int cli_interrupt_status(int rc);

#endif

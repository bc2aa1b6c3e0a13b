/* Download progress: a bar that fits the terminal's width (TIOCGWINSZ, else COLUMNS, else 80; at
 * most HK_BAR_MAX_WIDTH) and is redrawn in place with \r, naming the file streaming now (with "+N"
 * when N more stream beside it) and showing bytes, speed and ETA once they mean something; or plain lines
 * every few seconds (--progress=plain); nothing when stderr is not a terminal unless asked, under
 * -q or --json, or with HF_HUB_DISABLE_PROGRESS_BARS as huggingface_hub reads it. Also the SIGINT
 * flag that turns Ctrl-C into a cancel of the transfer. */
#include "cli/progress.h"
#include "cli/cli.h"
#include "internal.h" /* hk__now_ms */

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_interrupted;
static cli_progress *g_active; /* the display on screen, for cli_progress_clear */

/* SIGINT and SIGTERM alike: the first stops the transfer at its next step (the command then says
 * what was kept), a second one ends the process at once with the shell's code for the signal. */
static void on_signal(int sig) {
    if (g_interrupted) { /* do not wait for the transfer loop */
        static const char msg[] = "\nhubkern: interrupted again; stopping now (partial files stay for the next pull)\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + sig);
    }
    g_interrupted = sig;
}

void cli_catch_interrupt(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_interrupted(void) { return (int)g_interrupted; }

int cli_interrupt_status(int rc) { return g_interrupted ? 128 + (int)g_interrupted : rc; }

static int env_true(const char *name) {
    const char *v = getenv(name);
    if (!v) return 0;
    return strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0;
}

int cli_progress_init(cli_progress *p, const char *arg) {
    memset(p, 0, sizeof *p);
    if (!arg || strcmp(arg, "auto") == 0) p->mode = isatty(STDERR_FILENO) ? HK_PROGRESS_BAR : HK_PROGRESS_NONE;
    else if (strcmp(arg, "bar") == 0) p->mode = HK_PROGRESS_BAR;
    else if (strcmp(arg, "plain") == 0) p->mode = HK_PROGRESS_PLAIN;
    else if (strcmp(arg, "none") == 0) p->mode = HK_PROGRESS_NONE;
    else return cli_usage_error("--progress takes auto, bar, plain or none, got '%s'", arg);
    /* an explicit --progress wins over the environment, as in hf; -q and --json always win */
    if ((!arg && env_true("HF_HUB_DISABLE_PROGRESS_BARS")) || cli_quiet() || cli_json()) p->mode = HK_PROGRESS_NONE;
    p->start_ms = hk__now_ms();
    return 0;
}

/* Wider than this, a longer bar only spreads the numbers away from the name. */
#define HK_BAR_MAX_WIDTH 160
/* No speed or ETA before this long and this many bytes since the first byte: a connection's first
 * half second says nothing about its rate (issue 24: "2.4 kB/s 353:01:55" at the start). */
#define HK_RATE_MIN_MS 1000u
#define HK_RATE_MIN_BYTES (256u << 10)
/* The average since the first byte is the rate for this long; then it is smoothed over windows. */
#define HK_RATE_AVERAGE_MS 3000u
#define HK_RATE_WINDOW_MS 500u

static int term_width(void) {
    struct winsize ws;
    int n = 0;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) n = ws.ws_col;
    const char *c = getenv("COLUMNS");
    if (n <= 0) n = c ? atoi(c) : 0;
    if (n <= 0) n = 80;
    return n > HK_BAR_MAX_WIDTH ? HK_BAR_MAX_WIDTH : n;
}

/* "512 B", "12.3 kB", "4.5 MB" (decimal units, as the rest of the CLI prints) */
static void human(char *buf, size_t cap, double n) {
    static const char *const u[] = {"B", "kB", "MB", "GB", "TB"};
    size_t i = 0;
    while (n >= 999.95 && i + 1 < sizeof u / sizeof u[0]) n /= 1000.0, i++;
    if (i == 0) snprintf(buf, cap, "%.0f %s", n, u[i]);
    else snprintf(buf, cap, "%.1f %s", n, u[i]);
}

static void eta_text(char *buf, size_t cap, const cli_progress *p) {
    if (!p->speed_ready || p->speed <= 0 || p->total_bytes <= p->done_bytes) {
        snprintf(buf, cap, p->total_bytes && p->total_bytes <= p->done_bytes ? "0:00" : "--:--");
        return;
    }
    unsigned long s = (unsigned long)((double)(p->total_bytes - p->done_bytes) / p->speed + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
    else snprintf(buf, cap, "%lu:%02lu", s / 60, s % 60);
}

/* the last path component, so that the name fits */
static const char *base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* "12.3 MB" per second, or "--" until the rate means something */
static void speed_text(char *buf, size_t cap, const cli_progress *p) {
    if (p->speed_ready) human(buf, cap, p->speed);
    else snprintf(buf, cap, "--");
}

/* the file's last path component, "+N" when N more stream beside it */
static void item_text(char *buf, size_t cap, const cli_progress *p) {
    if (!p->item[0]) {
        buf[0] = '\0';
        return;
    }
    if (p->active_files > 1) snprintf(buf, cap, "%s +%u", base(p->item), p->active_files - 1);
    else snprintf(buf, cap, "%s", base(p->item));
}

static void draw_bar(cli_progress *p) {
    int w = term_width();
    if (w < 20) w = 20;
    char done[24], total[24], speed[24], eta[48], stats[200], named[300];
    human(done, sizeof done, (double)p->done_bytes);
    human(total, sizeof total, (double)p->total_bytes);
    speed_text(speed, sizeof speed, p);
    eta_text(eta, sizeof eta, p);
    double f = p->total_bytes ? (double)p->done_bytes / (double)p->total_bytes : 0;
    if (f > 1) f = 1;
    int pct = (int)(f * 100);
    /* widest first; drop parts until the line fits in w - 1 columns (no wrap, no scroll) */
    char line[512];
    item_text(named, sizeof named, p);
    const char *name = named;
    int name_max = w >= 120 ? 40 : 24; /* a wide terminal shows long file names whole */
    for (int level = 0; level < 5; level++) {
        if (level == 0) snprintf(stats, sizeof stats, " %3d%% %s/%s %s/s %s %u/%u", pct, done, total, speed, eta,
                                 p->done_files, p->total_files);
        else if (level == 1) snprintf(stats, sizeof stats, " %3d%% %s/%s %s/s %s", pct, done, total, speed, eta);
        else if (level == 2) snprintf(stats, sizeof stats, " %3d%% %s %s/s %s", pct, done, speed, eta);
        else snprintf(stats, sizeof stats, " %3d%% %s", pct, eta);
        int room = w - 1 - (int)strlen(stats);
        int namew = level >= 4 ? 0 : (int)strlen(name) < name_max ? (int)strlen(name) : name_max;
        if (namew && room - namew - 1 < 12) namew = room - 13 > 8 ? room - 13 : 0;
        int cells = room - 2 - (namew ? namew + 1 : 0);
        if (cells < 5 && level < 4) continue;
        if (cells < 1) cells = 1;
        if (cells > 80) cells = 80;
        int k = (int)(f * cells);
        char bar[88];
        for (int i = 0; i < cells; i++) bar[i] = i < k ? '#' : ' ';
        bar[cells] = '\0';
        snprintf(line, sizeof line, "%.*s%s[%s]%s", namew, name, namew ? " " : "", bar, stats);
        if ((int)strlen(line) <= w - 1 || level == 4) break;
    }
    if ((int)strlen(line) > w - 1) line[w - 1] = '\0';
    /* \r, the line, then erase what a longer earlier line left to the right */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    p->drawn = 1;
}

static void draw_plain(const cli_progress *p) {
    char done[24], total[24], speed[24], eta[48], named[300];
    human(done, sizeof done, (double)p->done_bytes);
    human(total, sizeof total, (double)p->total_bytes);
    speed_text(speed, sizeof speed, p);
    eta_text(eta, sizeof eta, p);
    item_text(named, sizeof named, p);
    fprintf(stderr, "hubkern %s: %s of %s (%u/%u files) at %s/s, eta %s%s%s\n", cli_command(), done, total,
            p->done_files, p->total_files, speed, eta, named[0] ? ", " : "", named);
    fflush(stderr);
}

/* The rate: nothing until HK_RATE_MIN_MS and HK_RATE_MIN_BYTES since the first new byte (resumed
 * bytes are not this run's), the average since then for HK_RATE_AVERAGE_MS, then an exponential
 * smoothing over HK_RATE_WINDOW_MS windows, so that one slow or fast window does not swing it. */
static void update_speed(cli_progress *p, uint64_t t, uint64_t done) {
    if (!p->first_ms) {
        if (p->speed_ms == 0) { /* the first callback: bytes already there (resumed) are the base */
            p->speed_ms = t ? t : 1;
            p->base_bytes = done;
            return;
        }
        if (done <= p->base_bytes) return;
        p->first_ms = p->speed_ms; /* the bytes arrived since that first callback */
    }
    uint64_t elapsed = t - p->first_ms, moved = done > p->base_bytes ? done - p->base_bytes : 0;
    if (!p->speed_ready && (elapsed < HK_RATE_MIN_MS || moved < HK_RATE_MIN_BYTES)) return;
    if (elapsed < HK_RATE_AVERAGE_MS || !p->speed_ready) {
        p->speed = elapsed ? (double)moved * 1000.0 / (double)elapsed : 0;
        p->speed_ready = 1;
        p->speed_ms = t;
        p->speed_bytes = done;
    } else if (t - p->speed_ms >= HK_RATE_WINDOW_MS) {
        double inst = (double)(done - p->speed_bytes) * 1000.0 / (double)(t - p->speed_ms);
        p->speed = 0.8 * p->speed + 0.2 * inst;
        p->speed_ms = t;
        p->speed_bytes = done;
    }
}

int cli_progress_cb(void *ud, const hk_progress *pr) {
    cli_progress *p = ud;
    if (g_interrupted) return 1;
    if (!p || p->mode == HK_PROGRESS_NONE || strcmp(pr->stage, "download") != 0) return 0;
    g_active = p;
    cli_output_set_line_clear(cli_progress_clear); /* messages clear the bar's line first */
    uint64_t t = hk__now_ms();
    /* what streams now: the library names none between files (never a finished one) */
    snprintf(p->item, sizeof p->item, "%s", pr->item ? pr->item : "");
    p->active_files = pr->active_files;
    update_speed(p, t, pr->done_bytes);
    p->done_bytes = pr->done_bytes;
    p->total_bytes = pr->total_bytes;
    p->done_files = pr->done_files;
    p->total_files = pr->total_files;
    bool finished = pr->total_bytes && pr->done_bytes >= pr->total_bytes && pr->done_files == pr->total_files;
    if (finished && p->first_ms && t > p->first_ms) { /* the whole transfer's average, however short */
        p->speed = (double)(pr->done_bytes - p->base_bytes) * 1000.0 / (double)(t - p->first_ms);
        p->speed_ready = 1;
    }
    if (p->mode == HK_PROGRESS_BAR) {
        if (t - p->last_ms >= 100 || finished) {
            p->last_ms = t;
            draw_bar(p);
        }
    } else if (p->last_ms == 0 || t - p->last_ms >= 2000 || finished) {
        if (finished && p->drawn) return 0; /* the final line once */
        p->last_ms = t ? t : 1;
        draw_plain(p);
        if (finished) p->drawn = 1;
    }
    return 0;
}

void cli_progress_clear(void) {
    cli_progress *p = g_active;
    if (p && p->mode == HK_PROGRESS_BAR && p->drawn) {
        fprintf(stderr, "\r\033[K");
        p->drawn = 0;
    }
}

void cli_progress_done(cli_progress *p) {
    if (p->mode == HK_PROGRESS_BAR && p->drawn) fprintf(stderr, "\n");
    p->drawn = 0;
    if (g_active == p) g_active = NULL;
}

/* tools/cli.h — what the `reprise` commands share: the commands' entry
 * points and option-parsing helpers. Exit status everywhere: 0 success, 1
 * the work failed (or, for `reprise bench` in a build configured with
 * -DREPRISE_BENCH=OFF, cannot be done by this build), 2 bad usage. */
#ifndef RP_CLI_H
#define RP_CLI_H

#define RP_CLI_OK 0
#define RP_CLI_FAILED 1
#define RP_CLI_USAGE 2

#include "reprise.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* A command: argv[0] is the command's name, options follow. */
typedef int (*rp_cli_cmd_fn)(int argc, char **argv);

int rp_cmd_bench(int argc, char **argv); /* only with REPRISE_HAVE_BENCH */
int rp_cmd_train(int argc, char **argv);
int rp_cmd_generate(int argc, char **argv);
int rp_cmd_dump(int argc, char **argv);
int rp_cmd_plot(int argc, char **argv);

/* Draws `reprise bench` JSON rows (len bytes) to out (.svg or .png) with
 * gnuplot; says why on stderr when it cannot. RP_CLI_OK or RP_CLI_FAILED. */
int rp_cli_plot_bench(const char *rows_json, size_t len, const char *out);
/* The gnuplot script `reprise plot --bench|--train FILE` draws with, for
 * the file's text (train 1: a --timings file) on terminal term ("svg"),
 * in *script (malloc'd): RP_CLI_OK, or RP_CLI_FAILED after saying why on
 * stderr as plot does, naming file. Runs no gnuplot (the fuzz target of
 * plot's readers enters here). */
int rp_cli_plot_script(int train, const char *file, const char *text,
                       size_t len, const char *term, char **script);
/* 1 when out ends in .svg or .png (any case). */
int rp_cli_plot_ext_ok(const char *out);
/* Whether gnuplot can be run (REPRISE_GNUPLOT, a path or a name on PATH;
 * else gnuplot on PATH): RP_CLI_OK, or after saying why on stderr
 * ("reprise CMD: ... cannot draw 'out'") RP_CLI_FAILED (none installed)
 * or RP_CLI_USAGE (REPRISE_GNUPLOT names no program); before any work
 * that needs it. */
int rp_cli_gnuplot_check(const char *cmd, const char *out);
/* rp_cli_gnuplot_check, then whether that gnuplot has the terminal out's
 * extension needs (PNG: pngcairo or png; said when not: RP_CLI_FAILED). */
int rp_cli_plot_terminal_check(const char *cmd, const char *out);

/* Parses a decimal integer in [lo, hi] with nothing after it. 1 ok, 0 not. */
int rp_cli_parse_uint(const char *s, unsigned long lo, unsigned long hi,
                      unsigned long *out);

/* Option opt's decimal integer s in [lo, hi] into *out; otherwise the usage
 * error "OPT: 'S' is not a number in LO..HI" for CMD (*out untouched).
 * RP_CLI_OK or RP_CLI_USAGE. */
int rp_cli_parse_u32(const char *cmd, const char *opt, const char *s,
                     unsigned long lo, unsigned long hi, uint32_t *out);

/* Parses a finite decimal real with nothing before or after it (no blanks:
 * as rp_cli_parse_uint). 1 ok, 0 not. */
int rp_cli_parse_double(const char *s, double *out);

/* --max-bytes N: a byte count, decimal with an optional K, M or G suffix
 * (powers of 1024), in 1..hi, into *out; otherwise a usage error for CMD.
 * RP_CLI_OK or RP_CLI_USAGE. */
int rp_cli_parse_bytes(const char *cmd, const char *opt, const char *s,
                       uint64_t hi, uint64_t *out);

/* --backend cpu|cuda|auto into *b; otherwise a usage error for CMD.
 * RP_CLI_OK or RP_CLI_USAGE. */
int rp_cli_parse_backend(const char *cmd, const char *s, rp_backend_kind *b);

/* Prints "reprise CMD: message" and a pointer to CMD's --help on stderr;
 * returns RP_CLI_USAGE. */
int rp_cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Calls each(item, arg) for every item of a comma-separated list (empty
 * items included). Stops at the first non-zero return and returns it. */
int rp_cli_each_item(const char *list, int (*each)(const char *item, void *arg),
                     void *arg);

/* ---- one grammar for the commands (README "Environment") ----
 * An option wins; its REPRISE_* variable applies when the option is not
 * given; a bad value in either is a usage error naming its source. */

/* The one range of --workers / REPRISE_WORKERS (CPU worker threads). */
#define RP_CLI_MAX_WORKERS 128

/* var's whole number in lo..hi into *out (and *set = 1) when var is set and
 * not empty; a bad value is a usage error "VAR=S: not a number in LO..HI".
 * RP_CLI_OK or RP_CLI_USAGE. */
int rp_cli_env_u32(const char *cmd, const char *var, unsigned long lo,
                   unsigned long hi, uint32_t *out, int *set);
/* REPRISE_BACKEND (cpu|cuda|auto) into *b, as rp_cli_env_u32. */
int rp_cli_env_backend(const char *cmd, rp_backend_kind *b, int *set);
/* "creating the runtime (--backend cuda)" or "(REPRISE_BACKEND=cuda)":
 * what failed and which source asked for the backend, into buf. */
void rp_cli_runtime_what(char *buf, size_t n, const char *src,
                         rp_backend_kind b);
/* For a command whose backend option may name its source: where no option
 * decided (*src NULL), REPRISE_BACKEND into *b and *src = "REPRISE_BACKEND"
 * when set; then every variable (rp_cli_env_check). RP_CLI_OK or
 * RP_CLI_USAGE. */
int rp_cli_env_backend_src(const char *cmd, rp_backend_kind *b,
                           const char **src);
/* REPRISE_WORKERS (1..RP_CLI_MAX_WORKERS; the deprecated REPRISE_CPUS when
 * it is unset) into *workers, as rp_cli_env_u32. */
int rp_cli_env_workers(const char *cmd, uint32_t *workers, int *set);
/* Every REPRISE_* variable a runtime reads (those above too, the
 * tunables, the debugging switches): the first bad value is a usage error
 * naming it. RP_CLI_OK or RP_CLI_USAGE. */
int rp_cli_env_check(const char *cmd);

/* Every file a command writes goes through the library's output writer
 * (reprise.h "Output files"): the path is replaced only by a complete
 * file, and an existing path that is not a regular file (a device, a
 * FIFO, a socket, a directory) is refused with its kind named.
 *
 * Checks before any work that output path (option opt) can be written
 * (rp_output_check: a temporary file is created next to it and removed;
 * the path itself is not touched). NULL passes. RP_CLI_OK, RP_CLI_USAGE
 * (empty name) or RP_CLI_FAILED with "reprise CMD: OPT PATH: why". */
int rp_cli_check_output(const char *cmd, const char *opt, const char *path);
/* rp_cli_check_output for each of n (option, path) pairs (NULL paths
 * skipped), and no two of them the same file (the same name, or existing
 * files with one inode): a usage error naming both options, since the
 * later write would replace the earlier one's file. */
int rp_cli_check_outputs(const char *cmd, const char *const (*outs)[2],
                         size_t n);
/* rp_cli_check_outputs' usage errors alone (no two outputs the same file;
 * nothing is created): for a command that reads an input before its
 * outputs' own checks. */
int rp_cli_check_output_names(const char *cmd, const char *const (*outs)[2],
                              size_t n);
/* Each of the m input paths ins[m] (option, path; NULL skipped) is not
 * empty: a usage error "OPT: an empty file name", else RP_CLI_OK. */
int rp_cli_check_inputs(const char *cmd, const char *const (*ins)[2], size_t m);
/* No output of outs[n] is one of the input files ins[m] (option, path;
 * NULL paths skipped): writing it would replace what the run reads.
 * --save-weights over --load-weights is allowed (resuming in place: the
 * checkpoint is read first and replaced whole). A usage error naming both
 * options, else RP_CLI_OK. */
int rp_cli_check_not_inputs(const char *cmd, const char *const (*outs)[2],
                            size_t n, const char *const (*ins)[2], size_t m);
/* rp_output_open, saying why not as rp_cli_check_output does. */
int rp_cli_output_open(const char *cmd, const char *opt, const char *path,
                       rp_output **o);
/* rp_output_commit (o NULL: RP_CLI_OK), saying why it failed ("... : the
 * file is unchanged"). */
int rp_cli_output_commit(const char *cmd, const char *opt, const char *path,
                         rp_output *o);
/* Whether a failed write to standard output (err: its errno, or 0 when
 * lost) found the reader gone: EPIPE, or a pipe whose read end is closed.
 * The commands say nothing then, as a shell pipeline's `| head` expects,
 * and exit 1. */
int rp_cli_stdout_reader_gone(int err);
/* A file's text (a key, a name) in a message: '\\' and every byte outside
 * printable ASCII as the text \xNN (as the graph loader quotes a file),
 * so no byte of a file reaches a terminal raw; at most 64 bytes, then
 * "...". */
void rp_cli_put_quoted(FILE *f, const char *s);
/* fprintf(f, fmt, ...) for a message on a terminal: every control byte
 * of the formatted text (a file name's newline or escape, in the text or
 * in an error detail that quotes it) but a last newline, and DEL, is
 * written as the text \xNN, and so are UTF-8's C1 controls (C2 80..C2
 * 9F, which a terminal may act on), so that no byte of a name reaches the
 * terminal raw and a message stays one line. Other bytes from 0x80 up
 * pass (UTF-8 names show). The message is written in one call. The usage
 * errors, the output checks and the messages of train, generate, bench
 * and plot go through it. */
void rp_cli_say(FILE *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A float as the fewest significant digits (up to 9) that read back as
 * it: 9.999999f is "9.999999", not %g's "10" (and 10 is "10", not
 * "1e+01"). Into buf (at least 16 bytes), returned. */
const char *rp_cli_float_str(char *buf, size_t n, float v);
/* A generated text on f: each byte as it is, except the control
 * characters a terminal would act on, which print as '?': the control
 * bytes other than newline and tab, DEL, and UTF-8's C1 controls (C2
 * 80..C2 9F, one '?' each). Other bytes from 0x80 up pass, so UTF-8 text
 * shows. A C2 is held until the byte after it tells what it starts. */
typedef struct rp_cli_text {
  FILE *f;
  int held; /* a C2 not yet written */
} rp_cli_text;
void rp_cli_text_put(rp_cli_text *t, int ch);
/* Writes a byte still held (the text's last byte was a C2). */
void rp_cli_text_end(rp_cli_text *t);
/* Appends printf-style text to the NUL-terminated buf of n bytes (cut
 * short when full). */
void rp_cli_appendf(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes `,\n  "key": v` into a JSON object: v as %.9g, or null when v is
 * not finite or ok is 0 (JSON has no NaN or infinity). */
void rp_cli_json_num(FILE *f, const char *key, double v, int ok);
/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), 0 if there is
 * none (p[0] NUL is a sequence of 1). */
size_t rp_cli_utf8_len(const unsigned char *p);
/* Writes `,\n  "key": "s"` (s escaped as a JSON string), or null when s is
 * NULL. UTF-8 passes as it is; a byte that is no part of well-formed
 * UTF-8 (a path's Latin-1 byte) is written as U+FFFD, so the file stays
 * valid JSON. */
void rp_cli_json_str(FILE *f, const char *key, const char *s);

/* Parses text[0, len) as exactly one JSON document (rp__json_parse_strict):
 * NULL, the reason (naming the byte) in rp_error_detail(), when it is
 * empty, is not JSON, holds a NUL byte or a \u0000 escape, or has more than
 * white space after the document; before any parse, when it holds more
 * than one JSON value per 6 bytes (above 65,536 values): reprise's traces
 * and timings hold one per 13 or more, and the parse tree (~64 bytes per
 * value) of "[0,0,0,..." stays within ~11 times the text. Builds without
 * cJSON answer NULL, "this build has no JSON support". The caller frees the
 * result with cJSON_Delete. */
struct cJSON *rp_cli_json_parse(const char *text, size_t len);

/* --help: usage(stdout), flushed at once so that a failed write keeps
 * its errno for rp_cli_stdout_errno (a later flush may find nothing left
 * to write, and the cause would be lost). */
void rp_cli_print_help(void (*usage)(FILE *f));
/* The errno of a failed write rp_cli_print_help saw, or 0. */
int rp_cli_stdout_errno(void);

/* The running command's usage text (for rp_cli_bad_option). */
void rp_cli_set_usage(void (*usage)(FILE *f));
/* After getopt_long reported an unknown option or a missing argument:
 * prints the command's usage on stderr; returns RP_CLI_USAGE. */
int rp_cli_bad_option(const char *cmd);

/* ---- --dist: options parsed once MPI runs ----
 * Under an MPI launcher (PMI_SIZE, PMI_RANK, PMIX_RANK or
 * OMPI_COMM_WORLD_SIZE set) a command given --dist starts MPI before it
 * parses its options, so that a rank whose options are refused stops
 * every rank rather than leave them waiting in MPI_Init. */
typedef int (*rp_cli_parse_fn)(int argc, char **argv, void *out);
/* 1 when argv holds --dist (or a prefix getopt_long takes for it) before
 * any "--", in a process an MPI launcher started. */
int rp_cli_wants_dist(int argc, char **argv);
/* With MPI initialized: rank 0 parses aloud, the others quietly; when the
 * verdicts differ, a rank whose verdict is not rank 0's parses again
 * aloud (its own error, said once, after "reprise CMD: rank R: refuses
 * its options") and every rank returns the worst status (2 when the only
 * refusal was a --help). Collective. `out` (size bytes) is zeroed before
 * the second parse. Without MPI: parse. */
int rp_cli_parse_dist(const char *cmd, int argc, char **argv,
                      rp_cli_parse_fn parse, void *out, size_t size);

/* An input the ranks must share, by its hash (rp_fnv1a64 from
 * RP_FNV64_INIT, train/ckpt.h) and what an error calls it ("the options",
 * "--reps"). */
typedef struct rp_cli_input {
  const char *what;
  uint64_t h;
} rp_cli_input;
/* With MPI initialized: RP_CLI_OK when every rank's n (1..8) inputs hash
 * as rank 0's; else RP_CLI_USAGE on every rank, rank 0 naming, in one
 * line, the ranks and inputs that differ ("reprise CMD: --dist: ranks
 * given other inputs than rank 0's ...: rank 1: --reps"). Collective: call
 * it on every rank before any other collective work, so that no rank
 * refuses alone. Without MPI: RP_CLI_OK. */
int rp_cli_same_inputs(const char *cmd, const rp_cli_input *in, unsigned n);

#endif

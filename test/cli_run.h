/* test/cli_run.h — runs the built `reprise` binary (REPRISE_CLI_PATH, set
 * by test/CMakeLists.txt for the tests that link cli_run.c) with its
 * stdout and stderr captured. */
#ifndef RP_TEST_CLI_RUN_H
#define RP_TEST_CLI_RUN_H

#include <stddef.h>

typedef struct cli_run {
  int status; /* exit status, -1 when it did not exit normally */
  char out[65536];
  char err[16384];
} cli_run;

/* Runs `reprise args...` (args NULL-terminated) with stdout and stderr
 * captured in temporary files; asserts that it could fork and wait. */
void run_cli(cli_run *r, const char *const *args);

#define RUN(r, ...) run_cli((r), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with descriptor fd (0, 1 or 2) closed in the command, as
 * `reprise ... >&-` runs it (what it writes there is lost). */
void run_cli_closed(cli_run *r, int fd, const char *const *args);

#define RUN_CLOSED(r, fd, ...)                                                 \
  run_cli_closed((r), (fd), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with stdout on a pseudo-terminal (what a user's terminal sees,
 * the progress bar included; the terminal turns "\n" into "\r\n"). */
void run_cli_tty(cli_run *r, const char *const *args);

#define RUN_TTY(r, ...)                                                        \
  run_cli_tty((r), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with stdout opened on the existing file out (e.g. /dev/full);
 * r->out stays empty. */
void run_cli_to(cli_run *r, const char *out, const char *const *args);

#define RUN_TO(r, out, ...)                                                    \
  run_cli_to((r), (out), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with stdout on a pipe whose read end is closed (`| head`
 * gone); r->out stays empty. */
void run_cli_closed_pipe(cli_run *r, const char *const *args);

#define RUN_CLOSED_PIPE(r, ...)                                                \
  run_cli_closed_pipe((r), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with the command's address space limited to as_bytes
 * (RLIMIT_AS) and OpenBLAS on one thread (its start-up buffers then fit
 * any limit the command starts under). Not for sanitizer builds: their
 * shadow memory needs more address space than any such limit. */
void run_cli_as(cli_run *r, unsigned long long as_bytes,
                const char *const *args);

#define RUN_AS(r, bytes, ...)                                                  \
  run_cli_as((r), (bytes), (const char *const[]){__VA_ARGS__, NULL})

/* run_cli with the command's descriptors 0, 1 and 2 alone open (none
 * inherited from the test) and at most nofile of them (RLIMIT_NOFILE):
 * nofile 4 leaves one for the files it opens. */
void run_cli_nofile(cli_run *r, unsigned nofile, const char *const *args);

#define RUN_NOFILE(r, n, ...)                                                  \
  run_cli_nofile((r), (n), (const char *const[]){__VA_ARGS__, NULL})

/* Reads fd from its start into buf (NUL-terminated, at most cap - 1 bytes)
 * and closes it. */
void cli_slurp(int fd, char *buf, size_t cap);

#endif

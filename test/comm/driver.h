/* test/comm/driver.h — what the command-line drivers of the "dist" tests
 * share (test/comm/train_dist.c, train_gpt_dist.c, bench_dist_fail.c): plain
 * programs, no Criterion (MPI does not survive its fork), that run the
 * built `reprise` under mpiexec and check its exit status, output and
 * files. */
#ifndef RP_TEST_COMM_DRIVER_H
#define RP_TEST_COMM_DRIVER_H

#include <stddef.h>

/* Checks failed so far (check). */
extern int drv_fails;

/* Prints "ok   ..." or "FAIL ..." (on stderr) and counts a failure. */
void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Makes the temporary directory from a mkdtemp template; path(name) is
 * name inside it (one of 8 rotating buffers). 0 on success. */
int drv_mkdir(char *template_);
char *path(const char *name);

/* The files path(pattern) matches (a glob: ".f.tmp.*"). */
int drv_count_files(const char *pattern);

/* A wrapper script path(name) (for drv_reprise_wrapped) that appends
 * `extra` (shell words) to rank 1's command line alone; NULL when it
 * cannot be written. */
const char *drv_rank1_script(const char *name, const char *extra);
/* A wrapper script path(name) that stops rank 1 (SIGSTOP) stop_s seconds
 * after it starts and kills it (SIGKILL) hold_s seconds later if it is
 * still there; NULL when it cannot be written. */
const char *drv_rank1_freeze_script(const char *name, unsigned stop_s,
                                    unsigned hold_s);

/* The whole file, NUL-terminated (*len bytes before it), or NULL. */
char *slurp(const char *p, size_t *len);

/* Runs argv (NULL-terminated) with stdout and stderr into `log`; returns
 * the exit status, or -1 when it did not exit normally. */
int run(char *const *argv, const char *log);

/* The command line every driver takes, REPRISE MPIEXEC NUMPROC_FLAG N:
 * keeps the first three for drv_reprise and returns N (>= 1), or prints
 * the usage and returns 0. */
int drv_args(int argc, char **argv);

/* `REPRISE a... b...` (b may be NULL), under `MPIEXEC NUMPROC_FLAG np`
 * when np > 0; its output goes to tag.log and, when it exits with neither
 * 0 nor 2, to stderr. Returns the exit status. */
int drv_reprise(int np, const char *tag, const char *const *a,
                const char *const *b);
/* The same, with `wrapper` (a shell script, run by sh) in front of REPRISE
 * on every rank. */
int drv_reprise_wrapped(int np, const char *tag, const char *wrapper,
                        const char *const *a, const char *const *b);

/* The end of a driver: without failures removes the temporary directory
 * and every file in it (with failures keeps them and says where), prints
 * the summary line for n ranks and returns the exit status (1: a check
 * failed). */
int drv_finish(int n);

/* The text after "key": in a JSON file (NULL when missing). */
const char *json_value(const char *json, const char *key);

/* Occurrences of needle in hay (0 for a NULL hay). */
int count(const char *hay, const char *needle);

#endif

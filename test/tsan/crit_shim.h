/* test/tsan/crit_shim.h — a small Criterion-compatible test runner, used
 * only in ThreadSanitizer builds (REPRISE_SANITIZER=thread).
 *
 * Why it exists: Criterion cannot start under TSan. Its runner maps an
 * "inheritable arena" (shared memory its sandboxed test processes use) at
 * an address that TSan's shadow memory owns, and dies before the first test
 * with "criterion: Could not initialize inheritable arena: Resource
 * temporarily unavailable" (Snaipe/Criterion#274, open upstream). So in TSan
 * builds the unit tests compile against this header instead: CMake puts
 * test/tsan/shim first on their include path, where criterion/criterion.h
 * includes this file, and links test/tsan/crit_shim.c (which holds main)
 * instead of libcriterion.
 *
 * This is a test runner, not a mock: the tests exercise the real library,
 * exactly as under Criterion; only registration, the per-test process and
 * the assertion plumbing are ours. It supports what test/ uses and no more:
 *   Test(suite, name [, .timeout = s] [, .init = f] [, .fini = f])
 *   TestSuite(suite [, .init = f] [, .fini = f] [, .timeout = s])
 *   cr_assert, cr_assert_not, cr_assert_eq/neq/lt/leq/gt/geq,
 *   cr_assert_null/not_null, cr_assert_str_eq/neq, cr_assert_str_empty,
 *   cr_assert_arr_eq, cr_assert_float_eq (each with an optional
 *   printf-style message, as in Criterion), cr_assert_fail, cr_skip_test and
 *   cr_log_warn, cr_log_info (whose message is required here).
 * Semantics kept from Criterion: each test runs in its own forked process
 * (the runner itself starts no thread), with the suite's .init before and
 * .fini after it; a test's .timeout (else its suite's) kills it; a failed
 * assertion ends the test. The message arguments are evaluated only when
 * the assertion fails. Differences: a failed assertion ends the test
 * process at once (_exit), so .fini does not run after a failure (the
 * process is gone anyway); the runner flags are only --filter, --list and
 * --help (crit_shim.c). */
#ifndef RP_TEST_CRIT_SHIM_H
#define RP_TEST_CRIT_SHIM_H

/* What <criterion/criterion.h> brings in C, so that the tests compile the
 * same against either. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- registration ---- */

/* Options of a test or a suite (designated initializers, as in Criterion).
 * sentinel_ lets Test(s, n) with no option still initialise the struct. */
struct crs_opts {
  double timeout;     /* seconds; 0: the suite's, else none */
  void (*init)(void); /* before the test, in its process */
  void (*fini)(void); /* after the test, in its process */
  int sentinel_;
};

struct crs_test {
  const char *suite;
  const char *name;
  void (*fn)(void);
  struct crs_opts opts;
};

struct crs_suite {
  const char *name;
  struct crs_opts opts;
};

void crs_register_test(const struct crs_test *t);
void crs_register_suite(const struct crs_suite *s);

#define CRS_TEST_(suite, name, ...)                                            \
  static void crs_fn_##suite##_##name(void);                                   \
  static const struct crs_test crs_test_##suite##_##name = {                   \
      #suite, #name, crs_fn_##suite##_##name, {__VA_ARGS__}};                  \
  __attribute__((constructor)) static void crs_reg_##suite##_##name(void) {    \
    crs_register_test(&crs_test_##suite##_##name);                             \
  }                                                                            \
  static void crs_fn_##suite##_##name(void)

#define CRS_SUITE_(suite, ...)                                                 \
  static const struct crs_suite crs_suite_##suite = {#suite, {__VA_ARGS__}};   \
  __attribute__((constructor)) static void crs_regs_##suite(void) {            \
    crs_register_suite(&crs_suite_##suite);                                    \
  }                                                                            \
  struct crs_suite_end_##suite /* swallows the ';' after TestSuite(...) */

/* CRS_TEST and CRS_SUITE expand the picked names before CRS_TEST_ and
 * CRS_SUITE_ paste them. */
#define CRS_TEST(...) CRS_TEST_(__VA_ARGS__)
#define CRS_SUITE(...) CRS_SUITE_(__VA_ARGS__)
#define Test(...)                                                              \
  CRS_TEST(CRS_A1(__VA_ARGS__, 0), CRS_A2(__VA_ARGS__, 0, 0),                  \
           CRS_DROP2(__VA_ARGS__, .sentinel_ = 0))
#define TestSuite(...)                                                         \
  CRS_SUITE(CRS_A1(__VA_ARGS__, 0), CRS_DROP1(__VA_ARGS__, .sentinel_ = 0))

/* ---- argument plumbing ----
 * Criterion's assertions take an optional message after their operands.
 * Standard C needs at least one argument for a macro's "...", so the
 * macros take only "..." and pick operands and message apart by counting
 * (up to 32 arguments in all). CRS_TAILk(...) is the message after k
 * operands: the caller's format and arguments, or "%s", "" when none. */
#define CRS_A1(a, ...) a
#define CRS_A2(a, b, ...) b
#define CRS_A3(a, b, c, ...) c
#define CRS_DROP1(a, ...) __VA_ARGS__
#define CRS_DROP2(a, b, ...) __VA_ARGS__
#define CRS_STR_(x) #x
#define CRS_STR(x) CRS_STR_(x)
#define CRS_CAT_(a, b) a##b
#define CRS_CAT(a, b) CRS_CAT_(a, b)

#define CRS_PICK_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, \
                  a15, a16, a17, a18, a19, a20, a21, a22, a23, a24, a25, a26,  \
                  a27, a28, a29, a30, a31, a32, x, ...)                        \
  x
/* crs_none when there are exactly k arguments, crs_more when more. */
#define CRS_MORE8_                                                             \
  crs_more, crs_more, crs_more, crs_more, crs_more, crs_more, crs_more, crs_more
#define CRS_PICK(...) CRS_PICK_(__VA_ARGS__)
#define CRS_HAS1(...)                                                          \
  CRS_PICK(__VA_ARGS__, CRS_MORE8_, CRS_MORE8_, CRS_MORE8_, crs_more,          \
           crs_more, crs_more, crs_more, crs_more, crs_more, crs_more,         \
           crs_none, 0)
#define CRS_HAS2(...)                                                          \
  CRS_PICK(__VA_ARGS__, CRS_MORE8_, CRS_MORE8_, CRS_MORE8_, crs_more,          \
           crs_more, crs_more, crs_more, crs_more, crs_more, crs_none, 0, 0)
#define CRS_HAS3(...)                                                          \
  CRS_PICK(__VA_ARGS__, CRS_MORE8_, CRS_MORE8_, CRS_MORE8_, crs_more,          \
           crs_more, crs_more, crs_more, crs_more, crs_none, 0, 0, 0)

#define CRS_TAIL1(...) CRS_CAT(CRS_TAIL1_, CRS_HAS1(__VA_ARGS__))(__VA_ARGS__)
#define CRS_TAIL2(...) CRS_CAT(CRS_TAIL2_, CRS_HAS2(__VA_ARGS__))(__VA_ARGS__)
#define CRS_TAIL3(...) CRS_CAT(CRS_TAIL3_, CRS_HAS3(__VA_ARGS__))(__VA_ARGS__)
#define CRS_TAIL1_crs_none(a) "%s", ""
#define CRS_TAIL1_crs_more(a, ...) __VA_ARGS__
#define CRS_TAIL2_crs_none(a, b) "%s", ""
#define CRS_TAIL2_crs_more(a, b, ...) __VA_ARGS__
#define CRS_TAIL3_crs_none(a, b, c) "%s", ""
#define CRS_TAIL3_crs_more(a, b, c, ...) __VA_ARGS__

/* ---- reporting (crit_shim.c) ---- */

/* Prints file:line, the expression, detail (when not NULL) and the message,
 * marks the test failed and ends its process with status 1. */
_Noreturn void crs_fail(const char *file, int line, const char *expr,
                        const char *detail, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Marks the test skipped with the message and ends its process. */
_Noreturn void crs_skip(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void crs_log(const char *tag, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "actual: ... / expected: ..." for the failure report (a static buffer:
 * only called on the failure path, which ends the process). */
const char *crs_detail_str(const char *a, const char *b);
const char *crs_detail_float(double a, double b, double eps);

/* ---- assertions ---- */

#define CRS_CHECK_(cond, text, detail, ...)                                    \
  do {                                                                         \
    if (!(cond))                                                               \
      crs_fail(__FILE__, __LINE__, text, detail, __VA_ARGS__);                 \
  } while (0)

#define CRS_CMP_(op, ...)                                                      \
  CRS_CHECK_((CRS_A1(__VA_ARGS__, 0))op(CRS_A2(__VA_ARGS__, 0, 0)),            \
             CRS_STR(CRS_A1(__VA_ARGS__, 0)) " " #op " " CRS_STR(              \
                 CRS_A2(__VA_ARGS__, 0, 0)),                                   \
             NULL, CRS_TAIL2(__VA_ARGS__))

#define cr_assert(...)                                                         \
  CRS_CHECK_(CRS_A1(__VA_ARGS__, 0), CRS_STR(CRS_A1(__VA_ARGS__, 0)), NULL,    \
             CRS_TAIL1(__VA_ARGS__))
#define cr_assert_not(...)                                                     \
  CRS_CHECK_(!(CRS_A1(__VA_ARGS__, 0)),                                        \
             "!(" CRS_STR(CRS_A1(__VA_ARGS__, 0)) ")", NULL,                   \
             CRS_TAIL1(__VA_ARGS__))
#define cr_assert_null(...)                                                    \
  CRS_CHECK_((CRS_A1(__VA_ARGS__, 0)) == NULL,                                 \
             CRS_STR(CRS_A1(__VA_ARGS__, 0)) " == NULL", NULL,                 \
             CRS_TAIL1(__VA_ARGS__))
#define cr_assert_not_null(...)                                                \
  CRS_CHECK_((CRS_A1(__VA_ARGS__, 0)) != NULL,                                 \
             CRS_STR(CRS_A1(__VA_ARGS__, 0)) " != NULL", NULL,                 \
             CRS_TAIL1(__VA_ARGS__))

#define cr_assert_eq(...) CRS_CMP_(==, __VA_ARGS__)
#define cr_assert_neq(...) CRS_CMP_(!=, __VA_ARGS__)
#define cr_assert_lt(...) CRS_CMP_(<, __VA_ARGS__)
#define cr_assert_leq(...) CRS_CMP_(<=, __VA_ARGS__)
#define cr_assert_gt(...) CRS_CMP_(>, __VA_ARGS__)
#define cr_assert_geq(...) CRS_CMP_(>=, __VA_ARGS__)

/* The string and float forms evaluate their operands once, into locals, so
 * that the report can show the values. */
#define cr_assert_str_eq(...)                                                  \
  do {                                                                         \
    const char *crs_a_ = (CRS_A1(__VA_ARGS__, 0));                             \
    const char *crs_b_ = (CRS_A2(__VA_ARGS__, 0, 0));                          \
    CRS_CHECK_(strcmp(crs_a_, crs_b_) == 0,                                    \
               "strcmp(" CRS_STR(CRS_A1(__VA_ARGS__, 0)) ", " CRS_STR(         \
                   CRS_A2(__VA_ARGS__, 0, 0)) ") == 0",                        \
               crs_detail_str(crs_a_, crs_b_), CRS_TAIL2(__VA_ARGS__));        \
  } while (0)
#define cr_assert_str_neq(...)                                                 \
  do {                                                                         \
    const char *crs_a_ = (CRS_A1(__VA_ARGS__, 0));                             \
    const char *crs_b_ = (CRS_A2(__VA_ARGS__, 0, 0));                          \
    CRS_CHECK_(strcmp(crs_a_, crs_b_) != 0,                                    \
               "strcmp(" CRS_STR(CRS_A1(__VA_ARGS__, 0)) ", " CRS_STR(         \
                   CRS_A2(__VA_ARGS__, 0, 0)) ") != 0",                        \
               crs_detail_str(crs_a_, crs_b_), CRS_TAIL2(__VA_ARGS__));        \
  } while (0)
#define cr_assert_str_empty(...)                                               \
  do {                                                                         \
    const char *crs_a_ = (CRS_A1(__VA_ARGS__, 0));                             \
    CRS_CHECK_(crs_a_[0] == '\0', CRS_STR(CRS_A1(__VA_ARGS__, 0)) " is empty", \
               crs_detail_str(crs_a_, ""), CRS_TAIL1(__VA_ARGS__));            \
  } while (0)
#define cr_assert_arr_eq(...)                                                  \
  CRS_CHECK_(memcmp((CRS_A1(__VA_ARGS__, 0)), (CRS_A2(__VA_ARGS__, 0, 0)),     \
                    (CRS_A3(__VA_ARGS__, 0, 0, 0))) == 0,                      \
             "memcmp(" CRS_STR(CRS_A1(__VA_ARGS__, 0)) ", " CRS_STR(CRS_A2(    \
                 __VA_ARGS__, 0, 0)) ", " CRS_STR(CRS_A3(__VA_ARGS__, 0, 0,    \
                                                         0)) ") == 0",         \
             NULL, CRS_TAIL3(__VA_ARGS__))
/* As Criterion: |actual - expected| <= epsilon, each side computed apart. */
#define cr_assert_float_eq(...)                                                \
  do {                                                                         \
    double crs_x_ = (CRS_A1(__VA_ARGS__, 0));                                  \
    double crs_y_ = (CRS_A2(__VA_ARGS__, 0, 0));                               \
    double crs_e_ = (CRS_A3(__VA_ARGS__, 0, 0, 0));                            \
    CRS_CHECK_(crs_y_ - crs_x_ <= crs_e_ && crs_x_ - crs_y_ <= crs_e_,         \
               CRS_STR(CRS_A1(__VA_ARGS__, 0)) " == " CRS_STR(CRS_A2(          \
                   __VA_ARGS__, 0, 0)) " within " CRS_STR(CRS_A3(__VA_ARGS__,  \
                                                                 0, 0, 0)),    \
               crs_detail_float(crs_x_, crs_y_, crs_e_),                       \
               CRS_TAIL3(__VA_ARGS__));                                        \
  } while (0)

#define cr_assert_fail(...)                                                    \
  crs_fail(__FILE__, __LINE__, "cr_assert_fail", NULL, __VA_ARGS__)
#define cr_skip_test(...) crs_skip(__FILE__, __LINE__, __VA_ARGS__)
#define cr_log_warn(...) crs_log("WARN", __VA_ARGS__)
#define cr_log_info(...) crs_log("INFO", __VA_ARGS__)

#endif

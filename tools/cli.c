/* tools/cli.c — option-parsing helpers shared by the commands. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rp_cli_parse_uint(const char *s, unsigned long lo, unsigned long hi,
                      unsigned long *out) {
  /* strtoul would accept "-1" (as ULONG_MAX) and leading blanks: refuse. */
  if (!s || !isdigit((unsigned char)s[0]))
    return 0;
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || *end || v < lo || v > hi)
    return 0;
  *out = v;
  return 1;
}

int rp_cli_parse_u32(const char *cmd, const char *opt, const char *s,
                     unsigned long lo, unsigned long hi, uint32_t *out) {
  unsigned long v;
  if (!rp_cli_parse_uint(s, lo, hi, &v))
    return rp_cli_usage_error(cmd, "%s: '%s' is not a number in %lu..%lu", opt,
                              s, lo, hi);
  *out = (uint32_t)v;
  return RP_CLI_OK;
}

int rp_cli_parse_bytes(const char *cmd, const char *opt, const char *s,
                       uint64_t hi, uint64_t *out) {
  char *end = NULL;
  unsigned long long v = 0;
  int ok = s && isdigit((unsigned char)s[0]);
  if (ok) {
    errno = 0;
    v = strtoull(s, &end, 10);
    ok = !errno;
  }
  unsigned shift = 0;
  if (ok && *end) {
    const char *units = "KMG", *u = strchr(units, toupper((unsigned char)*end));
    ok = u && end[1] == 0;
    shift = ok ? 10u * (unsigned)(u - units + 1) : 0;
  }
  if (ok && shift && v > (ULLONG_MAX >> shift))
    ok = 0;
  if (ok)
    v <<= shift;
  if (!ok || v < 1 || v > hi)
    return rp_cli_usage_error(cmd, "%s: '%s' is not a byte count in 1..%llu "
                              "(K, M, G suffixes allowed)", opt,
                              s ? s : "", (unsigned long long)hi);
  *out = v;
  return RP_CLI_OK;
}

int rp_cli_parse_backend(const char *cmd, const char *s, rp_backend_kind *b) {
  if (strcmp(s, "cpu") == 0)
    *b = RP_BACKEND_CPU;
  else if (strcmp(s, "cuda") == 0)
    *b = RP_BACKEND_CUDA;
  else if (strcmp(s, "auto") == 0)
    *b = RP_BACKEND_AUTO;
  else
    return rp_cli_usage_error(cmd, "--backend: '%s' is not cpu, cuda or auto",
                              s);
  return RP_CLI_OK;
}

int rp_cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "reprise %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'reprise %s --help'.\n", cmd);
  return RP_CLI_USAGE;
}

int rp_cli_each_item(const char *list, int (*each)(const char *item, void *arg),
                     void *arg) {
  char item[64];
  for (const char *p = list;;) {
    size_t len = strcspn(p, ",");
    /* Longer than any name: truncated, it still matches none. */
    size_t n = len < sizeof item ? len : sizeof item - 1;
    memcpy(item, p, n);
    item[n] = '\0';
    int rc = each(item, arg);
    if (rc || p[len] == '\0')
      return rc;
    p += len + 1;
  }
}

/* engine/env_rules.h — the REPRISE_* variables the library reads, and
 * what each may hold. rp_runtime_create checks them (unless ignore_env);
 * the command line checks the same table before any work, so that both
 * accept and refuse the same values. */
#ifndef RP_ENV_RULES_H
#define RP_ENV_RULES_H

#include <stddef.h>

typedef struct rp_env_rule {
  const char *var;
  unsigned long lo, hi; /* a whole number in lo..hi, when words is NULL */
  const char *words;    /* else one of these, '|'-separated, exact case */
} rp_env_rule;

extern const rp_env_rule rp_env_rules[];
extern const size_t rp_env_nrules;

/* 1 when s (set, not empty) is what rule r accepts: one of its words, or
 * a whole number in lo..hi (digits only: no sign, blank or suffix). */
int rp__env_rule_accepts(const rp_env_rule *r, const char *s);

#endif

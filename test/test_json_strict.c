/* The strict JSON parse behind graph files, traces and the command line's
 * JSON inputs (rp__json_parse_strict), differentially: against cJSON with
 * a working allocator (whatever cJSON refuses must never be reported as
 * running out of memory) and against the reference validator of
 * test/json_ref.h (what the parse accepts is JSON; what is JSON and holds
 * no NUL it accepts, and with every cJSON allocation failing it reports
 * as RP_ENOMEM). Inputs: edge cases picked by hand, and seeded random
 * mutations of the graph files, traces and plot inputs of the fuzz
 * corpora. test/fuzz/fuzz_json.c fuzzes the same properties. */
#include "helpers.h"

#include "json_ref.h"

#ifdef REPRISE_HAVE_CJSON
#include "capture/json_strict.h"

#include <cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the properties ---- */

static int cjson_broken; /* cJSON's allocations fail */

static void *failing_malloc(size_t n) {
  (void)n;
  return NULL;
}

static void cjson_allocs_fail(int on) {
  cJSON_Hooks h = {.malloc_fn = failing_malloc, .free_fn = free};
  cJSON_InitHooks(on ? &h : NULL);
  cjson_broken = on;
}

/* Shows text[0, len) for a message: printable bytes as they are, the rest
 * as \xNN, at most 600 bytes of it. */
static const char *shown(const char *text, size_t len) {
  static char out[2600];
  size_t o = 0;
  for (size_t i = 0; i < len && o + 8 < sizeof out; i++) {
    unsigned char c = (unsigned char)text[i];
    if (o > 2400) {
      o += (size_t)snprintf(out + o, sizeof out - o, "...");
      break;
    }
    if (c >= 0x20 && c < 0x7f)
      out[o++] = (char)c;
    else
      o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
  }
  out[o] = 0;
  return out;
}

/* Checks every property on text[0, len); counts into *valid the inputs the
 * reference reads as JSON. */
static void check(const char *text, size_t len, size_t *valid) {
  /* cJSON itself, with its allocations working */
  const char *end = NULL;
  cJSON *ref = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  int cjson_ok = ref != NULL;
  cJSON_Delete(ref);

  cJSON *doc = NULL;
  rp_status st = rp__json_parse_strict(text, len, UINT64_MAX, &doc);
  const char *why = st ? rp_error_detail() : "";
  cJSON_Delete(doc);
  cr_assert(cjson_ok || st != RP_ENOMEM,
            "cJSON refuses the text, but the parse says memory ran out "
            "(%s): \"%s\"",
            why, shown(text, len));
  cr_assert(st != RP_ENOMEM, "RP_ENOMEM with memory to spare (%s): \"%s\"", why,
            shown(text, len));
  size_t stop = 0;
  int json = jr_valid_at(text, len, &stop);
  size_t from = stop > 40 ? stop - 40 : 0;
  cr_assert(st != RP_OK || json,
            "not JSON (at byte %zu of %zu), but the parse accepts it: "
            "\"...%s...\"",
            stop, len, shown(text + from, len - from < 80 ? len - from : 80));
  if (!json || jr_has_nul(text, len))
    return;
  ++*valid;
  cr_assert_eq(st, RP_OK, "JSON, but the parse refuses it (%s): \"%s\"", why,
               shown(text, len));

  /* the same JSON with every cJSON allocation failing: memory ran out */
  cjson_allocs_fail(1);
  doc = NULL;
  st = rp__json_parse_strict(text, len, UINT64_MAX, &doc);
  cjson_allocs_fail(0);
  char want[64];
  snprintf(want, sizeof want, "out of memory parsing %zu bytes of JSON", len);
  cr_assert_eq(st, RP_ENOMEM, "%s, not RP_ENOMEM (%s): \"%s\"",
               rp_status_name(st), rp_error_detail(), shown(text, len));
  cr_assert(strstr(rp_error_detail(), want), "%s", rp_error_detail());
  cr_assert_null(doc);
}

static void check_str(const char *text, size_t *valid) {
  check(text, strlen(text), valid);
}

/* ---- edge cases ---- */

Test(json_strict, edge_cases_agree_with_cjson_and_the_reference) {
  static const char *const cases[] = {
      /* nothing, white space */
      "", " ", " \t\r\n", "\v1", "1\f", "[1,\x01 2]",
      /* literals */
      "true", "false", "null", "tru", "nul", "True", "NULL", "truex",
      "[true false]", "Infinity", "-Infinity", "NaN", "[NaN]", "[nan]", "[inf]",
      /* numbers */
      "0", "-0", "1", "-", "--1", "+1", "[+1]", "1.", "[1.]", ".5", "[.5]",
      "1e", "[1e]", "1e+", "1E-2", "1e5", "1.e5", "[1.e5]", "01", "[01]", "00",
      "-01", "[-01]", "0x10", "[0x10]", "1.5.2", "1e5e5", "[1 2]", "1.0E+3",
      "[-0.0e-0]", "123456789012345678901234567890", "[1e99999]", "[-1e-99999]",
      "[1,-]", "[1,1.]", "{\"a\":01}", "{\"a\":1.}", "{\"a\":-}", "[1]1", "0 1",
      /* strings and every escape */
      "\"\"", "\"a\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\a\"", "\"\\x41\"",
      "\"\\'\"", "\"\\U0041\"", "\"\\u0041\"", "\"\\u00e9\"", "\"\\u00E9\"",
      "\"\\uFFFF\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\uZZZZ\"", "\"a\\uZZZZb\"",
      "[\"a\\u12g4\"]", "\"\\u\"", "\"\\u0\"", "\"\\u00\"", "\"\\u000\"",
      "\"\\u0000\"", "\"a\\u0000b\"", "\"\\\\u0000\"", "\"\\", "\"abc",
      "\"\\\"", "'a'",
      /* surrogate pairs: valid, reversed, lone, cut */
      "\"\\ud83d\\ude00\"", "\"\\uD83D\\uDE00\"", "\"\\ude00\\ud83d\"",
      "\"\\ud800\"", "\"\\udc00\"", "\"\\udfff\"", "\"\\ud800x\"",
      "\"\\ud800\\u0041\"", "\"\\ud800\\ud800\"", "\"\\ud800\\\"",
      "\"\\ud800\\u\"", "\"\\ud800\\udc\"", "\"\\ud800\\uzzzz\"",
      "\"\\ud800\\n\"", "\"\\udbff\\udfff\"", "\"\\ud800\\\\udc00\"",
      /* raw bytes in strings: control bytes, invalid UTF-8 */
      "\"\x01\x1f\t\n\"", "\"\x7f\"", "\"\x80\xff\xc0\xaf\"",
      "\"\xed\xa0\x80\"", "[\"\xf5\xff\"]",
      /* byte order marks */
      "\xef\xbb\xbf[1]", "\xef\xbb\xbf", "\xef\xbb\xbf ",
      "\xef\xbb\xbf"
      "1",
      "\xef\xbb\xbf"
      "01",
      "\xef\xbb\xbf"
      "1.",
      "\xef\xbb\xbf-", "\xef\xbb\xbf\xef\xbb\xbf[1]", " \xef\xbb\xbf[1]",
      "[1]\xef\xbb\xbf", "\xef\xbb[1]", "\xfe\xff[1]",
      /* containers */
      "[]", "{}", "[ ]", "{ }", "[", "]", "{", "}", "[,]", "[1,]", "[,1]",
      "[1,,2]", "{\"a\":1,}", "{,}", "{\"a\"}", "{\"a\":}", "{\"a\" 1}",
      "{\"a\":1 \"b\":2}", "{1:2}", "{a:1}", "{'a':1}", "{\"a\":1,\"a\":2}",
      "[}", "{]", "[[]]]", "[[]", "{\"a\":[}]}", "[{}]", "{\"\":{}}", "[1]  ",
      "  [1]", "[1] x", "[1]\n\n", "[\"]\"]", "{\"}\":\"{\"}", "[\"\\\\\"]",
      "[\"\\\\\\\"\"]", "/*c*/[1]", "[1]//c", "[1];", "{\"a\":1}{\"b\":2}",
      "[1][2]"};
  size_t valid = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    check_str(cases[i], &valid);
  cr_assert_gt(valid, 40, "%zu valid cases", valid);

  /* NUL bytes inside, after and before the document */
  static const char nul[][8] = {"[1\0]",    "[1]\0", "\0[1]", "\"a\0b\"",
                                "[\"\0\"]", "\0",    "1\0 "};
  static const size_t nul_len[] = {4, 4, 4, 5, 5, 1, 3};
  for (size_t i = 0; i < sizeof nul_len / sizeof *nul_len; i++)
    check(nul[i], nul_len[i], &valid);
}

/* Text cJSON reads although it is not JSON is refused, naming the byte:
 * a \u escape without 4 hex digits (cJSON reads it as a NUL that cuts the
 * string: "a\uZZZZb" was "a"), and a bare number that is not JSON's
 * (cJSON reads "1." and "01" as documents), after a byte order mark too.
 * A byte order mark before a document is skipped, as cJSON does. */
Test(json_strict, what_cjson_reads_but_json_is_not_is_refused) {
  static const char *const bad[][2] = {
      {"[\"a\\uZZZZb\"]", "not JSON: a bad escape at byte 3"},
      {"{\"k\": \"\\u12G4\"}", "not JSON: a bad escape at byte 7"},
      {"\"\\ud800\\u00zz\"", "not JSON: a bad escape at byte 7"},
      {"1.", "not JSON: the text ends early at byte 2 (truncated file?)"},
      {"-", "not JSON: the text ends early at byte 1 (truncated file?)"},
      {" 2.5e", "not JSON: the text ends early at byte 5 (truncated file?)"},
      {"01", "not JSON: a malformed number at byte 0"},
      {"-01", "not JSON: a malformed number at byte 0"},
      {"1.e5", "not JSON: a malformed number at byte 0"},
      {"\n047", "not JSON: a malformed number at byte 1"},
      {"\xef\xbb\xbf"
       "01",
       "not JSON: a malformed number at byte 3"},
      {"\xef\xbb\xbf"
       "1. ",
       "not JSON: a malformed number at byte 3"},
      {"\xef\xbb\xbf"
       "[1.]",
       "not JSON: a malformed number at byte 4"},
      /* cut where the value after a byte order mark starts */
      {"\xef\xbb\xbf-",
       "not JSON: the text ends early at byte 4 (truncated file?)"},
      {"\xef\xbb\xbf"
       "tr",
       "not JSON: the text ends early at byte 5 (truncated file?)"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    cJSON *doc = NULL;
    RP_EXPECT(rp__json_parse_strict(bad[i][0], strlen(bad[i][0]), 100, &doc),
              RP_EFORMAT);
    cr_assert_null(doc);
    cr_assert(strstr(rp_error_detail(), bad[i][1]), "'%s': %s",
              shown(bad[i][0], strlen(bad[i][0])), rp_error_detail());
  }
  static const char *const good[] = {"1", "-0.5e+3",
                                     "\xef\xbb\xbf"
                                     "1",
                                     "\xef\xbb\xbf[1, \"\\u00e9\"]",
                                     "\"\\ud83d\\ude00\""};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    cJSON *doc = NULL;
    RP_CHECK(rp__json_parse_strict(good[i], strlen(good[i]), 100, &doc));
    cJSON_Delete(doc);
  }
}

/* Nesting at and past cJSON's limit, in arrays, objects and both. */
Test(json_strict, nesting_at_and_past_the_limit) {
  size_t valid = 0;
  for (int depth = CJSON_NESTING_LIMIT - 1; depth <= CJSON_NESTING_LIMIT + 1;
       depth++) {
    char *t = malloc(8 * (size_t)depth + 16);
    /* [[[...]]] */
    memset(t, '[', (size_t)depth);
    memset(t + depth, ']', (size_t)depth);
    check(t, 2 * (size_t)depth, &valid);
    /* cut one short, and one bracket too many */
    check(t, 2 * (size_t)depth - 1, &valid);
    t[2 * depth] = ']';
    check(t, 2 * (size_t)depth + 1, &valid);
    /* {"a":{"a":...1...}} */
    size_t n = 0;
    for (int k = 0; k < depth; k++)
      n += (size_t)sprintf(t + n, "{\"a\":");
    t[n++] = '1';
    memset(t + n, '}', (size_t)depth);
    check(t, n + (size_t)depth, &valid);
    /* [{"a":[{"a":...}]}] */
    n = 0;
    for (int k = 0; k < depth; k++)
      n += (size_t)sprintf(t + n, k % 2 ? "{\"a\":" : "[");
    if ((depth - 1) % 2) /* the innermost is an object: its value */
      t[n++] = '1';
    for (int k = depth - 1; k >= 0; k--)
      t[n++] = k % 2 ? '}' : ']';
    check(t, n, &valid);
    cr_assert_eq(valid,
                 depth > CJSON_NESTING_LIMIT
                     ? 6
                     : 3 * (size_t)(depth - CJSON_NESTING_LIMIT + 2),
                 "depth %d: %zu valid", depth, valid);
    free(t);
  }
  cr_assert_eq(valid, 6, "%zu", valid); /* depth 999 and 1000, three each */
}

/* ---- seeded mutations of real files ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Bytes a mutation writes: JSON's punctuation, escapes' letters, digits,
 * number parts, white space, control and high bytes. */
static const char pool[] = "{}[],:\"\\/ubfnrtUe E+-.0123456789aAfFxz \t\n\r"
                           "\x01\x0b\x1f\x7f\x80\xbf\xef\xff";
static const char *const pieces[] = {"\\u0000",
                                     "\\ud800",
                                     "\\udc00",
                                     "\\ud83d\\ude00",
                                     "\\uzzzz",
                                     "\\u12",
                                     "\\",
                                     "\"",
                                     "true",
                                     "null",
                                     "-",
                                     "1.",
                                     "01",
                                     "1e",
                                     "[",
                                     "]",
                                     "{",
                                     "}",
                                     ",",
                                     ":",
                                     "\xef\xbb\xbf",
                                     "[[[[",
                                     "]]]]",
                                     "\"\":"};

/* One random edit of buf[0, *len) (capacity cap). */
static void mutate(char *buf, size_t *len, size_t cap) {
  size_t n = *len, at = n ? (size_t)(rng() % n) : 0;
  switch (rng() % 8) {
  case 0: /* replace a byte */
  case 1:
    if (n)
      buf[at] = pool[rng() % (sizeof pool - 1)];
    break;
  case 2: /* delete a run */
    if (n) {
      size_t k = 1 + (size_t)(rng() % 4);
      if (k > n - at)
        k = n - at;
      memmove(buf + at, buf + at + k, n - at - k);
      *len = n - k;
    }
    break;
  case 3: /* insert a byte */
    if (n + 1 <= cap) {
      memmove(buf + at + 1, buf + at, n - at);
      buf[at] = pool[rng() % (sizeof pool - 1)];
      *len = n + 1;
    }
    break;
  case 4: { /* insert a piece */
    const char *p = pieces[rng() % (sizeof pieces / sizeof *pieces)];
    size_t k = strlen(p);
    if (n + k <= cap) {
      memmove(buf + at + k, buf + at, n - at);
      memcpy(buf + at, p, k);
      *len = n + k;
    }
    break;
  }
  case 5: /* cut the end */
    *len = at;
    break;
  case 6: /* duplicate a run */
    if (n) {
      size_t k = 1 + (size_t)(rng() % 16);
      if (k > n - at)
        k = n - at;
      if (n + k <= cap) {
        memmove(buf + at + k, buf + at, n - at);
        *len = n + k;
      }
    }
    break;
  default: /* flip a bit */
    if (n)
      buf[at] ^= (char)(1u << (rng() % 8));
    break;
  }
}

/* The JSON files of one corpus folder under test/fuzz (or NULL). */
static size_t corpus_files(const char *folder, char **texts, size_t *lens,
                           size_t max) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/fuzz/%s", RP_TEST_SOURCE_DIR, folder);
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  size_t n = 0;
  struct dirent *e;
  while (n < max && (e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue;
    char path[1536];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    texts[n] = th_read_all(path, &lens[n]);
    cr_assert_not_null(texts[n], "%s", path);
    n++;
  }
  closedir(d);
  return n;
}

Test(json_strict, mutations_of_corpus_files_agree, .timeout = 600) {
  enum { max_files = 64, rounds = 600 };
  char *texts[max_files];
  size_t lens[max_files], nfiles = 0;
  const char *folders[] = {"corpus", "corpus_trace", "corpus_diff",
                           "corpus_plot"};
  for (size_t f = 0; f < sizeof folders / sizeof *folders; f++)
    nfiles += corpus_files(folders[f], texts + nfiles, lens + nfiles,
                           max_files - nfiles);
  cr_assert_gt(nfiles, 20);
  size_t valid = 0, runs = 0;
  for (size_t f = 0; f < nfiles; f++) {
    size_t cap = lens[f] + 256;
    char *buf = malloc(cap);
    for (int r = 0; r < rounds; r++) {
      size_t len = lens[f];
      memcpy(buf, texts[f], len);
      /* one to four edits, each input checked */
      for (int k = 1 + (int)(rng() % 4); k > 0; k--) {
        mutate(buf, &len, cap);
        check(buf, len, &valid);
        runs++;
      }
    }
    check(texts[f], lens[f], &valid);
    free(buf);
    free(texts[f]);
  }
  /* enough of both kinds to mean something */
  cr_assert_gt(valid, runs / 50, "%zu of %zu inputs are JSON", valid, runs);
  cr_assert_lt(valid, runs - runs / 10, "%zu of %zu inputs are JSON", valid,
               runs);
}

#else

Test(json_strict, unsupported_without_cjson) {
  cr_skip_test("built without cJSON: no JSON parse to test");
}

#endif

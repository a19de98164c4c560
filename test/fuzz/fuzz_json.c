/* test/fuzz/fuzz_json.c — libFuzzer target for the strict JSON parse
 * behind graph files, traces and the command line's JSON inputs
 * (rp__json_parse_strict), checked against cJSON and against the
 * reference validator of test/json_ref.h (RFC 8259's grammar, written
 * apart from the library's):
 *  - memory to spare, the parse never says it ran out (RP_ENOMEM): that
 *    is said when cJSON fails on text the library's json_valid reads as
 *    JSON, so it would tell a user with a broken file that memory ran out;
 *  - what the parse accepts is JSON;
 *  - JSON without a NUL byte or \u0000 escape is accepted, and with every
 *    cJSON allocation failing is RP_ENOMEM.
 * A failure traps, so libFuzzer keeps the input. Seeds: the graph-file
 * corpus (test/fuzz/corpus), with the dictionary json.dict. */
#include "capture/json_strict.h"
#include "test/json_ref.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef REPRISE_HAVE_CJSON
static void *failing_malloc(size_t n) {
  (void)n;
  return NULL;
}

static void fail(const char *what, rp_status st) {
  fprintf(stderr, "fuzz_json: %s: %s (%s)\n", what, rp_status_name(st),
          st ? rp_error_detail() : "");
  __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  cJSON *doc = NULL;
  rp_status st = rp__json_parse_strict(text, size, UINT64_MAX, &doc);
  cJSON_Delete(doc);
  if (st == RP_ENOMEM) {
    cJSON *ref = cJSON_ParseWithLength(text, size);
    int cjson_ok = ref != NULL;
    cJSON_Delete(ref);
    fail(cjson_ok ? "RP_ENOMEM with memory to spare"
                  : "cJSON refuses the text, and the parse says memory ran out",
         st);
  }
  int json = jr_valid(text, size);
  if (st == RP_OK && !json)
    fail("the parse accepts text that is not JSON", st);
  if (!json || jr_has_nul(text, size))
    return 0;
  if (st != RP_OK)
    fail("the parse refuses JSON", st);
  cJSON_Hooks h = {.malloc_fn = failing_malloc, .free_fn = free};
  cJSON_InitHooks(&h);
  doc = NULL;
  st = rp__json_parse_strict(text, size, UINT64_MAX, &doc);
  cJSON_InitHooks(NULL);
  if (st != RP_ENOMEM || doc)
    fail("JSON with cJSON's allocations failing", st);
  return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)data;
  (void)size;
  return 0;
}
#endif

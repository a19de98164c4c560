/* test/fuzz/fuzz_text.c — libFuzzer target for GPT text corpora (gpt.h
 * "text data"), read as `reprise train --model gpt --text` reads them, for a
 * small context: each input is encoded from memory (rp_text_from_bytes) and
 * from a file (rp_text_load, the command line's entry), which must agree. A
 * text that loads must keep gpt.h's promises (tokens below the vocabulary,
 * a vocabulary in increasing order, each split long enough for a window),
 * and its windows and bigram baseline must come out as training and
 * evaluation take them. */
#include "fuzz_file.h"
#include "train/gpt.h"

#include <math.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CONTEXT 8u
#define BATCH 2u

static fz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_file_open(&file, "text");
  return 0;
}

static void check(const rp_text *t, size_t size) {
  if (t->n != size || t->vocab < 2 || t->vocab > RP_GPT_MAX_VOCAB ||
      t->ntrain < CONTEXT + 1 || t->n - t->ntrain < CONTEXT + 1)
    fz_fail("a loaded text breaks gpt.h's shape");
  for (uint32_t i = 1; i < t->vocab; i++)
    if (t->bytes[i] <= t->bytes[i - 1])
      fz_fail("a loaded vocabulary is not in increasing order");
  for (size_t i = 0; i < t->n; i++)
    if (t->tokens[i] >= t->vocab)
      fz_fail("a token is outside the vocabulary");
  int32_t x[2 * BATCH * CONTEXT], y[2 * BATCH * CONTEXT];
  if (rp_text_windows(t, 0, t->ntrain, BATCH, CONTEXT, 1, 0, 2, x, y) ||
      rp_text_windows(t, t->ntrain, t->n, BATCH, CONTEXT, 1, 0, 2, x, y))
    fz_fail("rp_text_windows");
  double loss = rp_text_bigram_loss(t, x, y, 2 * BATCH * CONTEXT);
  if (!isfinite(loss) || loss < 0)
    fz_fail("the bigram baseline is not a finite loss");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rp_text a, b;
  rp_status sa = rp_text_from_bytes("text", data, size, CONTEXT, &a);
  fz_file_set(&file, data, size);
  rp_status sb = rp_text_load(file.path, 0, CONTEXT, &b);
  if (sa != sb)
    fz_fail("rp_text_from_bytes and rp_text_load disagree");
  if (sb != RP_OK && !strstr(rp_error_detail(), file.path))
    fz_fail("a text error does not name the file");
  if (sa != RP_OK)
    return 0;
  check(&a, size);
  if (a.vocab != b.vocab || a.n != b.n || a.ntrain != b.ntrain ||
      memcmp(a.bytes, b.bytes, a.vocab) || memcmp(a.tokens, b.tokens, a.n))
    fz_fail("rp_text_from_bytes and rp_text_load give other texts");
  rp_text_free(&a);
  rp_text_free(&b);
  return 0;
}

/* test/fuzz/fuzz_gpt_ckpt.c — libFuzzer target for GPT checkpoints, read
 * as `reprise train --model gpt --load-weights` and `reprise generate` read
 * them: the one streaming reader, as rp_gpt_ckpt_read_info (what both
 * commands check a file with before loading it) on the input's file
 * (fuzz_ckpt.h: a mode byte, then the file, resealed or not), then
 * rp_gpt_ckpt_fits against a fixed small model (that of the seed corpus);
 * rp_gpt_ckpt_read, the same reader keeping the values, must answer alike,
 * with the same header, vocabulary and checksum. The container's entries
 * are checked against each other on the same bytes. A file must load or be
 * refused with an error naming it; a checkpoint that loads must keep
 * gpt.h's promises (a vocabulary in increasing order, finite values, as
 * many as its shape says). */
#include "fuzz_ckpt.h"
#include "train/gpt.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file file;
static rp_gpt_config model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_file_open(&file, "gpt.ckpt");
  rp_gpt_config_init(&model);
  model.layers = 1; /* the seeds' shape (make_train_corpus.c) */
  model.heads = 1;
  model.width = 2;
  model.context = 2;
  model.vocab = 3;
  return 0;
}

static void check(const rp_gpt_ckpt *c) {
  if (c->vocab < 2 || c->vocab > RP_GPT_MAX_VOCAB || !c->data || !c->ndata)
    fz_fail("a loaded checkpoint breaks gpt.h's shape");
  for (uint32_t i = 1; i < c->vocab; i++)
    if (c->bytes[i] <= c->bytes[i - 1])
      fz_fail("a loaded vocabulary is not in increasing order");
  for (size_t i = 0; i < c->ndata; i++)
    if (!isfinite(c->data[i]))
      fz_fail("a loaded weight is not finite");
  rp_status st = rp_gpt_ckpt_fits(c, &model);
  if (st != RP_OK && st != RP_ESHAPE)
    fz_fail("rp_gpt_ckpt_fits");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = 0;
  unsigned char *b = fz_ckpt_input(data, size, 0, &n);
  if (!b)
    return 0;
  fz_file_set(&file, b, n);
  rp_gpt_ckpt c, info;
  rp_status ist = rp_gpt_ckpt_read_info(file.path, &info);
  if (ist != RP_OK && !strstr(rp_error_detail(), file.path))
    fz_fail("a GPT checkpoint error does not name the file");
  rp_status st = rp_gpt_ckpt_read(file.path, &c);
  if (st != ist)
    fz_fail("rp_gpt_ckpt_read and rp_gpt_ckpt_read_info disagree");
  if (st == RP_OK && (info.layers != c.layers || info.heads != c.heads ||
                      info.width != c.width || info.context != c.context ||
                      info.vocab != c.vocab || info.step != c.step ||
                      info.ndata != c.ndata || info.checksum != c.checksum ||
                      info.data || memcmp(info.bytes, c.bytes, c.vocab)))
    fz_fail("rp_gpt_ckpt_read_info reads another header");
  if (st == RP_OK) {
    check(&c);
    rp_gpt_ckpt_free(&c);
  } else if (!strstr(rp_error_detail(), file.path)) {
    fz_fail("a GPT checkpoint error does not name the file");
  }
  fz_ckpt_container(&file, "gpt", b, n);
  free(b);
  return 0;
}

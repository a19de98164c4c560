/* test/fuzz/fuzz_mlp_ckpt.c — libFuzzer target for MLP checkpoints (a
 * container, or a bare weights record), read as `reprise train
 * --load-weights` reads them: rp_mlp_ckpt_read on the input's file
 * (fuzz_ckpt.h: a mode byte, then the file, resealed or not), then
 * rp_mlp_ckpt_fits against a fixed small model (that of the seed corpus).
 * The container's entries are checked against each other on the same
 * bytes. A file must load or be refused with an error naming it; a
 * checkpoint that loads must keep mlp.h's promises (its layer count and
 * widths, finite values, as many as its widths say, a schedule the
 * options allow). */
#include "fuzz_ckpt.h"
#include "train/mlp.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file file;
static rp_mlp_config model;
static rp_dataset shape; /* features and classes alone */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_file_open(&file, "mlp.ckpt");
  rp_mlp_config_init(&model);
  model.nhidden = 1; /* the seeds' shape, 2-4-3 (make_train_corpus.c) */
  model.hidden[0] = 4;
  shape.features = 2;
  shape.classes = 3;
  return 0;
}

static void check(const rp_mlp_ckpt *c) {
  if (c->layers < 1 || c->layers > RP_MLP_MAX_HIDDEN + 1 || !c->params)
    fz_fail("a loaded checkpoint breaks mlp.h's shape");
  uint64_t want = 0;
  for (uint32_t l = 0; l < c->layers; l++)
    want += 2 * ((uint64_t)c->widths[l] * c->widths[l + 1] + c->widths[l + 1]);
  if (want != c->nparams)
    fz_fail("a loaded checkpoint's values disagree with its widths");
  for (size_t i = 0; i < c->nparams; i++)
    if (!isfinite(c->params[i]))
      fz_fail("a loaded weight is not finite");
  if (!(c->info.lr > 0) || !isfinite(c->info.lr) || !(c->info.lr_decay >= 0) ||
      !isfinite(c->info.lr_decay) ||
      !(c->info.momentum >= 0 && c->info.momentum < 1) || c->info.batch < 1)
    fz_fail("a loaded schedule is outside the options' domain");
  rp_status st = rp_mlp_ckpt_fits(c, &model, &shape);
  if (st != RP_OK && st != RP_ESHAPE)
    fz_fail("rp_mlp_ckpt_fits");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t n = 0;
  unsigned char *b = fz_ckpt_input(data, size, 1, &n);
  if (!b)
    return 0;
  fz_file_set(&file, b, n);
  rp_mlp_ckpt c;
  rp_status st = rp_mlp_ckpt_read(file.path, &c);
  if (st == RP_OK) {
    check(&c);
    rp_mlp_ckpt_free(&c);
  } else if (!strstr(rp_error_detail(), file.path)) {
    fz_fail("an MLP checkpoint error does not name the file");
  }
  fz_ckpt_container(&file, "mlp", b, n);
  free(b);
  return 0;
}

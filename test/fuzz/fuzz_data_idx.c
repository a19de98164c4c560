/* test/fuzz/fuzz_data_idx.c — libFuzzer target for IDX (MNIST-style) data
 * pairs, read as `reprise train --data IMAGES --labels LABELS` reads them
 * (rp_data_load_idx). An input is split into the two files: its first two
 * bytes (big-endian) give the images file's length, capped at what is left
 * of the input; the images follow, and the rest is the labels file. A pair
 * must load or be refused with an error; a data set that loads must keep
 * data.h's promises (features in [0, 1], labels below classes). */
#include "fuzz_file.h"
#include "train/data.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file images, labels;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_file_open(&images, "images");
  fz_file_open(&labels, "labels");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t n = (size_t)data[0] << 8 | data[1];
  data += 2;
  size -= 2;
  if (n > size)
    n = size;
  fz_file_set(&images, data, n);
  fz_file_set(&labels, data + n, size - n);
  rp_dataset d = {0};
  if (rp_data_load_idx(images.path, labels.path, 0, &d) != RP_OK)
    return 0;
  if (d.n < 1 || d.features < 1 || d.classes < 2 || d.classes > 256)
    fz_fail("a loaded IDX pair breaks data.h's shape");
  for (size_t i = 0; i < (size_t)d.n * d.features; i++)
    if (!(d.x[i] >= 0.0f && d.x[i] <= 1.0f))
      fz_fail("a loaded IDX feature is outside [0, 1]");
  for (uint32_t i = 0; i < d.n; i++)
    if (d.y[i] < 0 || (uint32_t)d.y[i] >= d.classes)
      fz_fail("a loaded IDX label is outside [0, classes)");
  rp_data_free(&d);
  return 0;
}

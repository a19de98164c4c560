/* test/fuzz/fuzz_data_load.c — libFuzzer target for MLP data files (CSV
 * and the binary format, train/data.h), read as `reprise train --data`
 * reads them: each input is a file given to rp_data_load_max with the
 * command line's default limit. A file must load or be refused with an
 * error; a data set that loads must keep data.h's promises (samples and
 * features, 2..65536 classes, labels below classes, finite features). A
 * limit one byte below the file's size must be refused with RP_ERANGE. */
#include "fuzz_file.h"
#include "train/data.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fz_file file;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fz_file_open(&file, "data");
  return 0;
}

static void check(const rp_dataset *d) {
  if (d->n < 1 || d->features < 1 || d->classes < 2 ||
      d->classes > RP_DATA_MAX_CLASSES || !d->x || !d->y)
    fz_fail("a loaded data set breaks data.h's shape");
  for (size_t i = 0; i < (size_t)d->n * d->features; i++)
    if (!isfinite(d->x[i]))
      fz_fail("a loaded feature is not finite");
  for (uint32_t i = 0; i < d->n; i++)
    if (d->y[i] < 0 || (uint32_t)d->y[i] >= d->classes)
      fz_fail("a loaded label is outside [0, classes)");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_file_set(&file, data, size);
  rp_dataset d = {0};
  if (rp_data_load_max(file.path, 0, &d) == RP_OK) {
    check(&d);
    rp_data_free(&d);
  }
  if (size >= 2 && rp_data_load_max(file.path, size - 1, &d) != RP_ERANGE)
    fz_fail("a file above --max-bytes is not refused with RP_ERANGE");
  return 0;
}

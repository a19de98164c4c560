/* test/fuzz/fuzz_plot.c — libFuzzer target for the JSON files `reprise
 * plot` reads (tools/cmd_plot.c): the input's first byte chooses the
 * reader (bit 0 set: a --timings file of `reprise train`, else the rows of
 * `reprise bench --json`), the rest is the file's text. A file that is
 * read must become a whole gnuplot script (rp_cli_plot_script: no gnuplot
 * runs); any other is refused with a message. ASan and UBSan catch the
 * rest. */
#include "reprise.h"
#include "tools/cli.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* plot's refusals go to the stdio stream stderr, one line per input: that
 * stream (not descriptor 2, where the sanitizers and libFuzzer report)
 * goes to /dev/null */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  FILE *null = fopen("/dev/null", "w");
  if (!null)
    abort();
  stderr = null;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  char *script = NULL;
  if (rp_cli_plot_script(data[0] & 1, "fuzz.json", (const char *)data + 1,
                         size - 1, "svg", &script) != RP_CLI_OK)
    return 0;
  size_t n = strlen(script);
  int whole = !strncmp(script, "set terminal svg\n", 17) && n >= 11 &&
              !strcmp(script + n - 11, "set output\n");
  if (!whole) { /* said on descriptor 2: the stream stderr is /dev/null */
    dprintf(2, "fuzz: a plot script that is not whole\n");
    __builtin_trap();
  }
  free(script);
  return 0;
}

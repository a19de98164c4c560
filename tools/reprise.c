/* tools/reprise.c — placeholder main until the CLI lands. */
#include "reprise.h"
#include <stdio.h>
int main(void) {
  printf("reprise %s\n", rp_version_string());
  return 0;
}

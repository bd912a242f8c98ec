// A test aid, never shipped: the library an attacker would plant in the
// shim cache. Its constructor runs as soon as anything opens it, before
// any check after the open could refuse it; it appends a line to the file
// named by MTC_PLANTED_MARKER, so that a test can tell whether it ever
// ran. tests/ffi/library_test.ts compiles it with cc (no build step).

#include <stdio.h>
#include <stdlib.h>

__attribute__((constructor)) static void planted(void) {
  const char *marker = getenv("MTC_PLANTED_MARKER");
  if (!marker) return;
  FILE *file = fopen(marker, "a");
  if (!file) return;
  fputs("the planted library ran\n", file);
  fclose(file);
}

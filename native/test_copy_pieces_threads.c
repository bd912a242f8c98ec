// A test aid, never shipped: drives copy_pieces.c's helper threads through
// thousands of jobs of random sizes and thread counts from one caller, and
// checks every piece landed. tests/ffi/copy_pieces_test.ts compiles it with
// copy_pieces.c under ThreadSanitizer (cc -fsanitize=thread), which reports
// any data race between the caller and the helpers (the job's table and
// count, its open state, the helpers inside it) as a failure.

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int32_t mtc_copy_pieces(const double *table, int32_t count, int32_t threads);

enum { PIECES = 300, PIECE_BYTES = 256, JOBS = 3000 };

static uint8_t src[PIECES][PIECE_BYTES];
static uint8_t dst[PIECES * PIECE_BYTES];
static double table[3 * PIECES];

int main(void) {
  for (int i = 0; i < PIECES; i++) {
    table[3 * i] = (double)(uintptr_t)src[i];
    table[3 * i + 1] = (double)(uintptr_t)(dst + i * PIECE_BYTES);
    table[3 * i + 2] = PIECE_BYTES;
  }
  for (int job = 1; job <= JOBS; job++) {
    int count = 1 + (job * 7919) % PIECES;
    for (int k = 0; k < count; k++) memset(src[k], job & 255, PIECE_BYTES);
    if (mtc_copy_pieces(table, count, 1 + job % 16) != 0) {
      printf("job %d: mtc_copy_pieces failed\n", job);
      return 1;
    }
    for (int k = 0; k < count; k++) {
      const uint8_t *piece = dst + k * PIECE_BYTES;
      if (piece[0] != (job & 255) || piece[PIECE_BYTES - 1] != (job & 255)) {
        printf("job %d: piece %d did not land\n", job, k);
        return 1;
      }
    }
  }
  printf("%d jobs: every piece landed\n", JOBS);
  return 0;
}

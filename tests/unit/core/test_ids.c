/* Unit tests for src/core/ids.c: identifier shape, uniqueness, uniformity, random bytes. */
#include "core/ids.h"
#include "unit.h"
#include <stdlib.h>
#include <string.h>

static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";

static int symbol_index(char c) {
  const char *p = c ? strchr(alphabet, c) : NULL;
  return p ? (int)(p - alphabet) : -1;
}

static void test_id_shape(void **state) {
  (void)state;
  for (int n = 0; n < 1000; n++) {
    char id[ID_LEN + 1];
    memset(id, 'X', sizeof id);
    id_new(id);
    assert_int_equal(strlen(id), 25);
    assert_int_equal(ID_LEN, 25);
    assert_int_equal(id[0], 'c');
    for (int i = 0; i < ID_LEN; i++)
      if (symbol_index(id[i]) < 0) fail_msg("id \"%s\" has '%c' at %d, outside [0-9a-z]", id, id[i], i);
  }
}

static int cmp_ids(const void *a, const void *b) { return strcmp(a, b); }

static void test_ids_distinct(void **state) {
  (void)state;
  enum { N = 10000 };
  char(*ids)[ID_LEN + 1] = calloc(N, sizeof *ids);
  assert_non_null(ids);
  for (int i = 0; i < N; i++) id_new(ids[i]);
  qsort(ids, N, sizeof *ids, cmp_ids);
  for (int i = 1; i < N; i++)
    if (!strcmp(ids[i - 1], ids[i])) fail_msg("duplicate id %s", ids[i]);
  free(ids);
}

/* Every one of the 36 symbols appears at positions 1..24 within 25% of the expected count. */
static void test_ids_uniform(void **state) {
  (void)state;
  enum { N = 20000 };
  long counts[36] = {0};
  long per_position[ID_LEN][36];
  memset(per_position, 0, sizeof per_position);
  for (int n = 0; n < N; n++) {
    char id[ID_LEN + 1];
    id_new(id);
    for (int i = 1; i < ID_LEN; i++) {
      int k = symbol_index(id[i]);
      assert_true(k >= 0);
      counts[k]++;
      per_position[i][k]++;
    }
  }
  const double expected = (double)N * (ID_LEN - 1) / 36.0; /* about 13,333 */
  for (int k = 0; k < 36; k++)
    if (counts[k] < expected * 0.75 || counts[k] > expected * 1.25)
      fail_msg("symbol '%c' seen %ld times, expected about %.0f", alphabet[k], counts[k], expected);
  /* no position is stuck on a few symbols either (expected about 555 each; 25% is about 6 sigma) */
  const double expected_pos = (double)N / 36.0;
  for (int i = 1; i < ID_LEN; i++)
    for (int k = 0; k < 36; k++)
      if (per_position[i][k] < expected_pos * 0.75 || per_position[i][k] > expected_pos * 1.25)
        fail_msg("symbol '%c' seen %ld times at position %d, expected about %.0f", alphabet[k], per_position[i][k], i,
                 expected_pos);
}

static void test_random_bytes_fills(void **state) {
  (void)state;
  unsigned char a[64], b[64];
  memset(a, 0, sizeof a);
  memset(b, 0, sizeof b);
  random_bytes(a, sizeof a);
  random_bytes(b, sizeof b);
  int nonzero = 0;
  for (size_t i = 0; i < sizeof a; i++) nonzero += a[i] != 0;
  assert_true(nonzero > 32); /* 64 random bytes: about 63.75 are nonzero */
  assert_memory_not_equal(a, b, sizeof a);

  /* a large buffer is filled to its last byte, and n = 0 writes nothing */
  enum { BIG = 1 << 20 };
  unsigned char *big = calloc(1, BIG);
  assert_non_null(big);
  random_bytes(big, BIG);
  int tail_nonzero = 0;
  for (size_t i = BIG - 64; i < BIG; i++) tail_nonzero += big[i] != 0;
  assert_true(tail_nonzero > 32);
  free(big);

  unsigned char guard[4] = {0xAA, 0xAA, 0xAA, 0xAA};
  random_bytes(guard, 0);
  for (int i = 0; i < 4; i++) assert_int_equal(guard[i], 0xAA);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_id_shape), cmocka_unit_test(test_ids_distinct),
          cmocka_unit_test(test_ids_uniform), cmocka_unit_test(test_random_bytes_fills))

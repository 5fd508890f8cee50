/* Unit tests for src/core/arena.c: zeroed aligned allocations, strings, deferred destructors. */
#include "core/arena.h"
#include "unit.h"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <wchar.h>

static int arena_setup(void **state) {
  static arena a;
  arena_init(&a);
  *state = &a;
  return 0;
}

static int arena_teardown(void **state) {
  arena_fini(*state);
  return 0;
}

static void test_alloc_zeroed_and_aligned(void **state) {
  arena *a = *state;
  const size_t align = _Alignof(max_align_t);
  const size_t sizes[] = {1, 3, 7, 16, 17, 100, 1000, 4095, 4096, 5000, 1};
  unsigned char *prev = NULL;
  for (int round = 0; round < 50; round++)
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
      unsigned char *p = arena_alloc(a, sizes[i]);
      assert_non_null(p);
      assert_int_equal((uintptr_t)p % align, 0);
      for (size_t j = 0; j < sizes[i]; j++)
        if (p[j]) fail_msg("byte %zu of a %zu-byte allocation is %d, not zero", j, sizes[i], p[j]);
      assert_true(p != prev);
      memset(p, 0xFF, sizes[i]); /* dirty it: later allocations must still come back zeroed */
      prev = p;
    }
}

/* Memory freed by one arena and reused by the next still comes back zeroed. */
static void test_alloc_zeroed_after_reuse(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    arena dirty;
    arena_init(&dirty);
    for (int i = 0; i < 64; i++) memset(arena_alloc(&dirty, 3000), 0xA5, 3000);
    arena_fini(&dirty); /* its chunks go back to malloc, full of 0xA5 */
    arena clean;
    arena_init(&clean);
    for (int i = 0; i < 64; i++) {
      unsigned char *p = arena_alloc(&clean, 3000);
      for (size_t j = 0; j < 3000; j++)
        if (p[j]) fail_msg("round %d, allocation %d: byte %zu is 0x%02x, not zero", round, i, j, p[j]);
    }
    arena_fini(&clean);
  }
}

static void test_allocations_do_not_overlap(void **state) {
  arena *a = *state;
  enum { N = 200 };
  unsigned char *ptrs[N];
  for (int i = 0; i < N; i++) {
    ptrs[i] = arena_alloc(a, 40);
    memset(ptrs[i], i, 40);
  }
  for (int i = 0; i < N; i++)
    for (int j = 0; j < 40; j++) assert_int_equal(ptrs[i][j], (unsigned char)i);
}

static void test_large_allocation(void **state) {
  arena *a = *state;
  const size_t mib = 1 << 20;
  (void)arena_alloc(a, 10); /* a small chunk first, so the big one needs a new chunk */
  unsigned char *p = arena_alloc(a, mib);
  assert_non_null(p);
  assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
  for (size_t i = 0; i < mib; i++)
    if (p[i]) fail_msg("byte %zu of 1 MiB is not zero", i);
  memset(p, 0x5A, mib);
  unsigned char *q = arena_alloc(a, 8 * mib + 3);
  assert_non_null(q);
  assert_int_equal(q[8 * mib + 2], 0);
  memset(q, 0xA5, 8 * mib + 3);
  assert_int_equal(p[0], 0x5A);
  assert_int_equal(p[mib - 1], 0x5A);
  /* small allocations still work afterwards */
  char *s = arena_strdup(a, "after");
  assert_string_equal(s, "after");
}

static void test_zero_size_allocation(void **state) {
  arena *a = *state;
  void *p = arena_alloc(a, 0);
  void *q = arena_alloc(a, 1);
  assert_non_null(q);
  (void)p;
  assert_int_equal((uintptr_t)q % _Alignof(max_align_t), 0);
}

static void test_strdup(void **state) {
  arena *a = *state;
  char src[] = "hello, arena";
  char *s = arena_strdup(a, src);
  assert_string_equal(s, "hello, arena");
  assert_ptr_not_equal(s, src);
  src[0] = 'J';
  assert_string_equal(s, "hello, arena"); /* a copy, not the same storage */
  assert_null(arena_strdup(a, NULL));
  char *e = arena_strdup(a, "");
  assert_non_null(e);
  assert_string_equal(e, "");
}

static void test_strndup(void **state) {
  arena *a = *state;
  char *s = arena_strndup(a, "abcdef", 3);
  assert_string_equal(s, "abc");
  assert_int_equal(s[3], 0);
  /* copies bytes regardless of NULs inside, and terminates */
  char *t = arena_strndup(a, "ab\0cd", 5);
  assert_memory_equal(t, "ab\0cd", 6);
  char *z = arena_strndup(a, "xyz", 0);
  assert_string_equal(z, "");
}

static void test_printf(void **state) {
  arena *a = *state;
  char *s = arena_printf(a, "%s-%d-%05.1f-%c", "job", 42, 3.14159, 'z');
  assert_string_equal(s, "job-42-003.1-z");
  char *e = arena_printf(a, "%s", "");
  assert_string_equal(e, "");
  /* longer than any small buffer */
  char big[10001];
  memset(big, 'q', 10000);
  big[10000] = 0;
  char *b = arena_printf(a, "<%s>", big);
  assert_int_equal(strlen(b), 10002);
  assert_int_equal(b[0], '<');
  assert_int_equal(b[10001], '>');
  assert_int_equal(b[5000], 'q');
}

static int order[8];
static int norder;

static void record(void *p) { order[norder++] = *(int *)p; }

static void test_defer_reverse_order(void **state) {
  (void)state;
  static int values[] = {1, 2, 3, 4};
  arena a;
  arena_init(&a);
  norder = 0;
  for (int i = 0; i < 4; i++) arena_defer(&a, record, &values[i]);
  (void)arena_alloc(&a, 100000); /* a new chunk between registrations changes nothing */
  assert_int_equal(norder, 0);   /* nothing runs before fini */
  arena_fini(&a);
  assert_int_equal(norder, 4);
  assert_int_equal(order[0], 4);
  assert_int_equal(order[1], 3);
  assert_int_equal(order[2], 2);
  assert_int_equal(order[3], 1);
  /* after fini the arena is empty and reusable; a second fini runs nothing again */
  assert_null(a.head);
  assert_null(a.defers);
  arena_defer(&a, record, &values[0]);
  arena_fini(&a);
  assert_int_equal(norder, 5);
  assert_int_equal(order[4], 1);
  arena_fini(&a);
  assert_int_equal(norder, 5);
}

static void test_json_reference_dropped(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  json_t *v = json_pack("{s:i}", "n", 1);
  assert_non_null(v);
  assert_int_equal(v->refcount, 1);
  json_incref(v); /* our own reference, to look at it after the arena's is gone */
  assert_ptr_equal(arena_json(&a, v), v);
  assert_int_equal(v->refcount, 2);  /* nothing dropped yet */
  assert_null(arena_json(&a, NULL)); /* NULL passes through without a destructor */
  arena_fini(&a);
  assert_int_equal(v->refcount, 1);
  assert_int_equal(json_integer_value(json_object_get(v, "n")), 1);
  json_decref(v);
}

/* Sizes near SIZE_MAX abort the process as out of memory (oom()): before, the rounding wrapped to a tiny
 * allocation, and the chunk size doubled until it overflowed and then looped forever. Each
 * runs in a child with an alarm, so a hang shows as SIGALRM instead of hanging the suite. */
static void test_impossible_sizes_end_the_process(void **state) {
  (void)state;
  const size_t sizes[] = {SIZE_MAX, SIZE_MAX - 7, SIZE_MAX / 2 + 1, SIZE_MAX / 2 - 100};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      alarm(5);
      if (!freopen("/dev/null", "w", stderr)) _exit(3);
      arena a;
      arena_init(&a);
      arena_alloc_raw(&a, 16); /* a first chunk, so growth starts from doubling */
      arena_alloc_raw(&a, sizes[i]);
      _exit(0); /* returned: the wrapped size was "allocated" */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
      fail_msg("size %zu: %s %d, not SIGABRT (out of memory)", sizes[i], WIFSIGNALED(status) ? "signal" : "exit",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
  }
}

/* A format whose output cannot be produced (an invalid wide character under the C locale)
 * gives a terminated empty string, not an unterminated buffer. */
static void test_printf_failure_gives_empty_string(void **state) {
  arena *a = *state;
  const wchar_t bad[] = {(wchar_t)0xD800, 0};
  char *p = arena_printf(a, "%ls", bad);
  assert_non_null(p);
  assert_string_equal(p, "");
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test_setup_teardown(test_alloc_zeroed_and_aligned, arena_setup, arena_teardown),
          cmocka_unit_test(test_alloc_zeroed_after_reuse),
          cmocka_unit_test_setup_teardown(test_allocations_do_not_overlap, arena_setup, arena_teardown),
          cmocka_unit_test_setup_teardown(test_large_allocation, arena_setup, arena_teardown),
          cmocka_unit_test_setup_teardown(test_zero_size_allocation, arena_setup, arena_teardown),
          cmocka_unit_test_setup_teardown(test_strdup, arena_setup, arena_teardown),
          cmocka_unit_test_setup_teardown(test_strndup, arena_setup, arena_teardown),
          cmocka_unit_test_setup_teardown(test_printf, arena_setup, arena_teardown),
          cmocka_unit_test(test_defer_reverse_order), cmocka_unit_test(test_json_reference_dropped),
          cmocka_unit_test(test_impossible_sizes_end_the_process),
          cmocka_unit_test_setup_teardown(test_printf_failure_gives_empty_string, arena_setup, arena_teardown))

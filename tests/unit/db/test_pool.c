/* Unit test for the pools of src/db/db.c: SQLite's slow pool opens its first 4 connections at
 * start and the others when a thread finds every open one taken; past its size, a thread waits
 * for one to be given back. */
#include "core/clock.h"
#include "core/config.h"
#include "db/db.h"
#include "unit.h"
#include "unit_db.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define SLOW 6

static int setup(void **state) {
  (void)state;
  unit_db_open_pools("pool", 2, SLOW);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unit_db_close();
  return 0;
}

static atomic_int held;
static atomic_bool let_go;

/* A slow-lane thread: takes a connection, runs a statement on it, holds it until let_go. */
static void *borrower(void *arg) {
  (void)arg;
  db_use_pool(DB_POOL_SLOW);
  db_conn *c = db_acquire();
  db_res *r;
  arena a;
  arena_init(&a);
  db_rc rc = db_exec(c, &a, &r, "SELECT 1", NULL, 0);
  arena_fini(&a);
  held++;
  while (!let_go) usleep(1000);
  db_release(c);
  return (void *)(intptr_t)(rc == DB_OK);
}

static db_pool_stats slow_stats(void) {
  db_pool_stats s;
  db_pool_stats_get(DB_POOL_SLOW, &s);
  return s;
}

/* Waits up to 5 s for done() to hold. */
static bool eventually(bool (*done)(void)) {
  for (int64_t until = clock_mono_ms() + 5000; clock_mono_ms() < until; usleep(1000))
    if (done()) return true;
  return done();
}

static bool all_held(void) { return held == SLOW; }
static bool one_waiting(void) { return slow_stats().waiting == 1; }

static void test_slow_pool_opens_as_needed(void **state) {
  (void)state;
  db_pool_stats s = slow_stats();
  assert_int_equal(s.size, SLOW);
  assert_int_equal(s.open, 4);
  pthread_t t[SLOW + 1];
  for (int i = 0; i < SLOW; i++) assert_int_equal(pthread_create(&t[i], NULL, borrower, NULL), 0);
  assert_true(eventually(all_held)); /* six at once: none waited, two were opened for them */
  s = slow_stats();
  assert_int_equal(s.open, SLOW);
  assert_int_equal(s.in_use, SLOW);
  assert_int_equal(s.waits, 0);
  assert_int_equal(pthread_create(&t[SLOW], NULL, borrower, NULL), 0); /* a seventh waits */
  assert_true(eventually(one_waiting));
  let_go = true;
  for (int i = 0; i <= SLOW; i++) {
    void *ok;
    assert_int_equal(pthread_join(t[i], &ok), 0);
    assert_true((intptr_t)ok);
  }
  s = slow_stats();
  assert_int_equal(s.open, SLOW);
  assert_int_equal(s.in_use, 0);
  assert_int_equal(s.waits, 1);
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_slow_pool_opens_as_needed))

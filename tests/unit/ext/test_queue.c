/* Unit tests for the durable queue's keyed work and periodic tasks (src/ext/queue.c) on a
 * temporary SQLite database: a key queues work once however often it is offered, and a
 * periodic task runs once per slot of the service clock, again when the clock reaches the
 * next slot. The API tests cover the queue through the real binary. */
#include "core/clock.h"
#include "db/db.h"
#include "db/migrate.h"
#include "ext/queue.h"
#include "unit.h"
#include "unit_db.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static _Atomic int ticks;
static _Atomic long long last_slot;

static bool on_tick(json_t *payload, char err[256]) {
  (void)err;
  atomic_store(&last_slot, (long long)json_integer_value(json_object_get(payload, "slot")));
  atomic_fetch_add(&ticks, 1);
  return true;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/mp-queue-XXXXXX");
  assert_non_null(mkdtemp(dir));
  char url[128], err[256];
  snprintf(url, sizeof url, "sqlite:%s/q.db", dir);
  assert_true(db_open(url, 2, 2, err));
  assert_true(db_migrate());
  return 0;
}

static int teardown(void **state) {
  (void)state;
  db_close();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static int64_t count_kind(const char *kind) {
  return unit_db_count("SELECT COUNT(*) FROM job_queue WHERE kind = $1", kind);
}

static void test_keyed_work_is_queued_once(void **state) {
  (void)state;
  json_t *payload = json_pack("{s:s}", "x", "y");
  bool added;
  db_conn *c = db_acquire();
  assert_int_equal(queue_enqueue_once(c, "keyed", "k-1", payload, &added), DB_OK);
  assert_true(added);
  assert_int_equal(queue_enqueue_once(c, "keyed", "k-1", payload, &added), DB_OK);
  assert_false(added);
  assert_int_equal(queue_enqueue_once(c, "keyed", "k-2", payload, &added), DB_OK);
  assert_true(added);
  /* unkeyed work never collides */
  assert_int_equal(queue_enqueue(c, "keyed", payload), DB_OK);
  assert_int_equal(queue_enqueue(c, "keyed", payload), DB_OK);
  db_release(c);
  json_decref(payload);
  assert_int_equal(count_kind("keyed"), 4);
  /* no handler runs these: remove them before the workers start */
  assert_int_equal(db_query(NULL, NULL, "DELETE FROM job_queue WHERE kind = 'keyed'", DB_NOARGS), DB_OK);
}

static void wait_ticks(int n) {
  for (int i = 0; i < 400 && atomic_load(&ticks) < n; i++) usleep(10000);
  assert_int_equal(atomic_load(&ticks), n);
}

static void test_periodic_task_runs_once_per_slot(void **state) {
  (void)state;
  const int64_t period = 3600 * 1000LL;
  queue_register("tick", on_tick);
  queue_every("tick", period);
  queue_start(2, 1);
  wait_ticks(1);
  int64_t now = clock_now_ms();
  assert_int_equal(atomic_load(&last_slot), now - now % period);
  usleep(600 * 1000); /* two more polls of each worker: the same slot is not queued again */
  assert_int_equal(atomic_load(&ticks), 1);
  clock_advance_ms(period);
  wait_ticks(2);
  now = clock_now_ms();
  assert_int_equal(atomic_load(&last_slot), now - now % period);
  queue_stop();
  assert_int_equal(count_kind("tick"), 2);
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_keyed_work_is_queued_once),
          cmocka_unit_test(test_periodic_task_runs_once_per_slot))

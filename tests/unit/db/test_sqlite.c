/* Unit tests for src/db/sqlite.c and the result building of src/db/db.c: a cached `SELECT *`
 * after another connection changed the table, integer cells kept as numbers, cell lengths. */
#include "core/config.h"
#include "db/db.h"
#include "unit.h"
#include "unit_db.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8
#define PER_THREAD 150

static int setup(void **state) {
  (void)state;
  unit_db_open("sqlite", THREADS);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unit_db_close();
  return 0;
}

/* Another connection (a second instance migrating) adds a column after this connection
 * prepared and cached `SELECT *`: the next run names and fills every column. */
static void test_select_star_after_schema_change(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE t (id TEXT, n INTEGER)", DB_NOARGS), DB_OK);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO t VALUES ('a', 7)", DB_NOARGS), DB_OK);
  assert_int_equal(db_query(&a, &r, "SELECT * FROM t", DB_NOARGS), DB_OK);
  assert_int_equal(r->cols, 2);
  sqlite3 *other;
  assert_int_equal(sqlite3_open(unit_db_path, &other), SQLITE_OK);
  assert_int_equal(
      sqlite3_exec(other, "ALTER TABLE t ADD COLUMN extra TEXT; UPDATE t SET extra = 'x'", NULL, NULL, NULL),
      SQLITE_OK);
  sqlite3_close(other);
  assert_int_equal(db_query(&a, &r, "SELECT * FROM t", DB_NOARGS), DB_OK);
  assert_int_equal(r->cols, 3);
  assert_string_equal(db_field(r, 0, "id"), "a");
  assert_string_equal(db_field(r, 0, "extra"), "x");
  assert_int_equal(db_int(r, 0, db_col(r, "n")), 7);
  arena_fini(&a);
}

/* Integers come back as their decimal text and as numbers; other cells keep their lengths. */
static void test_cells(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, &r,
                            "SELECT -9223372036854775807 - 1 AS lo, 9223372036854775807 AS hi, 0 AS zero, 'x''y' AS s, "
                            "NULL AS nil, 2.5 AS r, CASE WHEN $1 = 1 THEN 3 ELSE 'three' END AS mixed",
                            DB_ARGS(DB_INT(1))),
                   DB_OK);
  assert_string_equal(db_text(r, 0, 0), "-9223372036854775808");
  assert_true(db_int(r, 0, 0) == INT64_MIN);
  assert_string_equal(db_text(r, 0, 1), "9223372036854775807");
  assert_true(db_int(r, 0, 1) == INT64_MAX);
  assert_string_equal(db_text(r, 0, 2), "0");
  assert_int_equal(db_len(r, 0, 3), 3);
  assert_string_equal(db_text(r, 0, 3), "x'y");
  assert_null(db_text(r, 0, 4));
  assert_int_equal(db_len(r, 0, 4), 0);
  assert_int_equal(db_int(r, 0, 4), 0);
  assert_string_equal(db_text(r, 0, 5), "2.5");
  assert_int_equal(db_int(r, 0, 6), 3);
  /* a column mixing integers and text in different rows reads its text */
  assert_int_equal(db_query(&a, &r, "SELECT 12 AS v UNION ALL SELECT '34x'", DB_NOARGS), DB_OK);
  assert_int_equal(r->rows, 2);
  assert_int_equal(db_int(r, 0, 0), 12);
  assert_int_equal(db_int(r, 1, 0), 34);
  arena_fini(&a);
}

/* Transactions from many threads share commits (group commit): every transaction whose COMMIT
 * returned DB_OK is in the table, none whose statement failed and was rolled back is, and a
 * failing member does not undo the others of its group. Writes outside a transaction too. */

static void *writer_thread(void *arg) {
  int t = (int)(intptr_t)arg, *committed = calloc(PER_THREAD, sizeof *committed);
  for (int i = 0; i < PER_THREAD; i++) {
    arena a;
    arena_init(&a);
    db_conn *c;
    err_t e = db_begin(&c);
    char key[32];
    snprintf(key, sizeof key, "k-%d-%d", t, i);
    if (!e)
      e = db_to_err(db_exec(c, NULL, NULL, "INSERT INTO g (k, t) VALUES ($1, $2)", DB_ARGS(DB_TEXT(key), DB_INT(t))));
    if (!e && i % 5 == 0) /* a duplicate: the statement fails, the transaction is rolled back */
      e = db_to_err(db_exec(c, NULL, NULL, "INSERT INTO g (k, t) VALUES ($1, $2)", DB_ARGS(DB_TEXT(key), DB_INT(t))));
    if (!e) {
      db_res *r;
      e = db_to_err(
          db_exec(c, &a, &r, "SELECT COUNT(*) FROM g WHERE k = $1", DB_ARGS(DB_TEXT(key)))); /* sees its own row */
      if (!e && db_int(r, 0, 0) != 1) e = ERR_INTERNAL;
    }
    committed[i] = db_end(c, e) == ERR_OK;
    if (i % 7 == 0) { /* and a write outside any transaction */
      snprintf(key, sizeof key, "solo-%d-%d", t, i);
      if (db_query(&a, NULL, "INSERT INTO g (k, t) VALUES ($1, $2)", DB_ARGS(DB_TEXT(key), DB_INT(t))) != DB_OK)
        committed[i] = -1;
    }
    arena_fini(&a);
  }
  return committed;
}

static void test_group_commit(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE g (k TEXT PRIMARY KEY, t INTEGER)", DB_NOARGS), DB_OK);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, writer_thread, (void *)(intptr_t)t);
  int expected = 0;
  for (int t = 0; t < THREADS; t++) {
    int *committed;
    pthread_join(th[t], (void **)&committed);
    for (int i = 0; i < PER_THREAD; i++) {
      assert_int_not_equal(committed[i], -1);
      assert_int_equal(committed[i], i % 5 != 0); /* exactly the transactions without a duplicate */
      expected += committed[i] + (i % 7 == 0);
    }
    free(committed);
  }
  db_res *r;
  assert_int_equal(db_query(&a, &r, "SELECT COUNT(*) FROM g", DB_NOARGS), DB_OK);
  assert_int_equal(db_int(r, 0, 0), expected);
  assert_int_equal(db_query(&a, &r, "SELECT COUNT(*) FROM g WHERE k LIKE 'k-%-0'", DB_NOARGS), DB_OK);
  assert_int_equal(db_int(r, 0, 0), 0); /* every i = 0 transaction had a duplicate */
  arena_fini(&a);
}

/* A database that fills up in the middle of group commits (SQLite's max_page_count on the
 * writer stands in for a full disk): every transaction answers DB_OK or DB_UNAVAILABLE, never
 * anything else; each one that answered DB_OK is in the table and none that failed is, even
 * when the failure was another member's; once there is room again, writes go on. */

/* Runs sql on the writer's connection (where a transaction's statements run). */
static void on_writer(const char *sql) {
  db_conn *c;
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_int_equal(db_exec(c, NULL, NULL, sql, DB_NOARGS), DB_OK);
  assert_int_equal(db_end(c, ERR_OK), ERR_OK);
}

static void *filling_thread(void *arg) {
  int t = (int)(intptr_t)arg, *outcome = calloc(PER_THREAD, sizeof *outcome);
  for (int i = 0; i < PER_THREAD; i++) {
    db_conn *c;
    char key[32];
    snprintf(key, sizeof key, "f-%d-%d", t, i);
    err_t e = db_begin(&c);
    if (!e)
      e = db_to_err(
          db_exec(c, NULL, NULL, "INSERT INTO f (k, v) VALUES ($1, randomblob(3000))", DB_ARGS(DB_TEXT(key))));
    outcome[i] = db_end(c, e);
  }
  return outcome;
}

static void test_full_database_during_group_commit(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE f (k TEXT PRIMARY KEY, v BLOB)", DB_NOARGS), DB_OK);
  assert_int_equal(db_query(&a, &r, "PRAGMA page_count", DB_NOARGS), DB_OK);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)db_int(r, 0, 0) + 40);
  on_writer(sql);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, filling_thread, (void *)(intptr_t)t);
  int ok = 0, unavailable = 0;
  for (int t = 0; t < THREADS; t++) {
    int *outcome;
    pthread_join(th[t], (void **)&outcome);
    for (int i = 0; i < PER_THREAD; i++) {
      char key[32];
      snprintf(key, sizeof key, "f-%d-%d", t, i);
      assert_true(outcome[i] == ERR_OK || outcome[i] == ERR_UNAVAILABLE);
      assert_int_equal(db_query(&a, &r, "SELECT COUNT(*) FROM f WHERE k = $1", DB_ARGS(DB_TEXT(key))), DB_OK);
      assert_int_equal(db_int(r, 0, 0), outcome[i] == ERR_OK);
      ok += outcome[i] == ERR_OK, unavailable += outcome[i] == ERR_UNAVAILABLE;
    }
    free(outcome);
  }
  assert_true(ok > 0 && unavailable > 0);
  on_writer("PRAGMA max_page_count = 1000000");
  assert_int_equal(db_query(&a, NULL, "INSERT INTO f (k, v) VALUES ('after', randomblob(3000))", DB_NOARGS), DB_OK);
  arena_fini(&a);
}

/* db_on_commit: the work runs once the transaction committed (after the connection went back,
 * so it may use the database), in registration order and once per (fn, arg); a rollback, or a
 * commit that fails, drops it; db_end(NULL, e) passes e through. */
static int runs[8], nruns;
static void record_run(void *arg) {
  db_res *r;
  arena a;
  arena_init(&a);
  /* the transaction is committed and its connection released: a new statement sees the row */
  assert_int_equal(db_query(&a, &r, "SELECT COUNT(*) FROM oc", DB_NOARGS), DB_OK);
  runs[nruns++] = (int)(intptr_t)arg * 100 + (int)db_int(r, 0, 0);
  arena_fini(&a);
}

static void test_on_commit(void **state) {
  (void)state;
  assert_int_equal(db_query(NULL, NULL, "CREATE TABLE oc (k TEXT PRIMARY KEY)", DB_NOARGS), DB_OK);
  db_conn *c;
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_true(db_in_tx(c));
  assert_int_equal(db_exec(c, NULL, NULL, "INSERT INTO oc (k) VALUES ('a')", DB_NOARGS), DB_OK);
  db_on_commit(c, record_run, (void *)1);
  db_on_commit(c, record_run, (void *)2);
  db_on_commit(c, record_run, (void *)1); /* the same work twice runs once */
  assert_int_equal(nruns, 0);             /* nothing before the commit */
  assert_int_equal(db_end(c, ERR_OK), ERR_OK);
  assert_int_equal(nruns, 2);
  assert_int_equal(runs[0], 101);
  assert_int_equal(runs[1], 201);
  /* rolled back: the work is dropped, and so is the row */
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_int_equal(db_exec(c, NULL, NULL, "INSERT INTO oc (k) VALUES ('b')", DB_NOARGS), DB_OK);
  db_on_commit(c, record_run, (void *)3);
  assert_int_equal(db_end(c, ERR_CONFLICT), ERR_CONFLICT);
  assert_int_equal(nruns, 2);
  /* the next transaction on that connection starts with nothing registered */
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_int_equal(db_end(c, ERR_OK), ERR_OK);
  assert_int_equal(nruns, 2);
  assert_int_equal(db_end(NULL, ERR_UNAVAILABLE), ERR_UNAVAILABLE);
}

/* db_before_commit: the writes run on the transaction's connection, inside it, just before the
 * commit and in registration order (once per (fn, arg)); one that fails rolls everything back
 * and db_end answers its error; `done` runs once the transaction ended, committed or not. */
static char trace[64];
static db_rc before_write(db_conn *c, void *arg) {
  snprintf(trace + strlen(trace), sizeof trace - strlen(trace), "w%s", (const char *)arg);
  return db_exec(c, NULL, NULL, "INSERT INTO bc (k) VALUES ($1)", DB_ARGS(DB_TEXT(arg)));
}
static db_rc before_fail(db_conn *c, void *arg) {
  (void)c, (void)arg;
  strcat(trace, "f");
  return DB_ERROR;
}
static void before_done_cb(void *arg) {
  snprintf(trace + strlen(trace), sizeof trace - strlen(trace), "d%s", (const char *)arg);
}
static void after_commit_cb(void *arg) {
  (void)arg;
  strcat(trace, "c");
}

static int64_t bc_rows(void) {
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, &r, "SELECT COUNT(*) FROM bc", DB_NOARGS), DB_OK);
  int64_t n = db_int(r, 0, 0);
  arena_fini(&a);
  return n;
}

static void test_before_commit(void **state) {
  (void)state;
  assert_int_equal(db_query(NULL, NULL, "CREATE TABLE bc (k TEXT PRIMARY KEY)", DB_NOARGS), DB_OK);
  db_conn *c;
  trace[0] = 0;
  assert_int_equal(db_begin(&c), ERR_OK);
  db_before_commit(c, before_write, before_done_cb, "1");
  db_before_commit(c, before_write, before_done_cb, "2");
  db_before_commit(c, before_write, before_done_cb, "1"); /* once */
  db_on_commit(c, after_commit_cb, NULL);
  assert_string_equal(trace, ""); /* nothing before db_end */
  assert_int_equal(db_end(c, ERR_OK), ERR_OK);
  assert_string_equal(trace, "w1w2d1d2c");
  assert_int_equal(bc_rows(), 2);
  /* a failing write rolls the whole transaction back */
  trace[0] = 0;
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_int_equal(db_exec(c, NULL, NULL, "INSERT INTO bc (k) VALUES ('mine')", DB_NOARGS), DB_OK);
  db_before_commit(c, before_write, before_done_cb, "3");
  db_before_commit(c, before_fail, before_done_cb, "4");
  db_on_commit(c, after_commit_cb, NULL);
  assert_int_equal(db_end(c, ERR_OK), ERR_INTERNAL);
  assert_string_equal(trace, "w3fd3d4");
  assert_int_equal(bc_rows(), 2);
  /* a transaction that ends in error runs no write, and lets go all the same */
  trace[0] = 0;
  assert_int_equal(db_begin(&c), ERR_OK);
  db_before_commit(c, before_write, before_done_cb, "5");
  assert_int_equal(db_end(c, ERR_CONFLICT), ERR_CONFLICT);
  assert_string_equal(trace, "d5");
  assert_int_equal(bc_rows(), 2);
}

/* On SQLite nothing waits for a round trip: a deferred statement runs at once (its failure
 * returned there), independent reads run one after the other, a guard runs at once and says
 * what it found, and every statement counts as one exchange. */
static void test_deferred_statements_run_at_once(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE later_t (id TEXT PRIMARY KEY, n INTEGER)", DB_NOARGS), DB_OK);
  db_conn *c;
  db_trips_clear();
  err_t e = db_begin(&c);
  db_res *r = NULL;
  if (!e) e = db_to_err(db_exec_later(c, &a, &r, "INSERT INTO later_t VALUES ('a', 1) RETURNING n", DB_NOARGS));
  assert_non_null(r);
  assert_int_equal(db_exec_later(c, NULL, NULL, "INSERT INTO later_t VALUES ('a', 2)", DB_NOARGS), DB_CONSTRAINT);
  e = db_end(c, e);
  assert_int_equal(e, ERR_OK);
  assert_int_equal(db_trips(), 4); /* BEGIN, two inserts, COMMIT */
  c = db_acquire();
  db_read reads[2] = {{"SELECT n FROM later_t WHERE id = $1", (db_val[]){DB_TEXT("a")}, 1, NULL},
                      {"SELECT count(*) FROM later_t", NULL, 0, NULL}};
  assert_int_equal(db_exec_all(c, &a, reads, 2), DB_OK);
  db_release(c);
  assert_int_equal(db_int(reads[0].res, 0, 0), 1);
  assert_int_equal(db_int(reads[1].res, 0, 0), 1);
  arena_fini(&a);
}

/* The statements of one db_exec_all outside a transaction run in one read transaction: a write
 * committed between two of them (here one of them, which the writer commits at once) is not
 * seen by the later ones, and the connection is back outside a transaction afterwards. */
static void test_reads_together_see_one_snapshot(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE snap_t (id TEXT PRIMARY KEY)", DB_NOARGS), DB_OK);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO snap_t VALUES ('a')", DB_NOARGS), DB_OK);
  db_conn *c = db_acquire();
  db_read reads[3] = {{"SELECT count(*) FROM snap_t", NULL, 0, NULL},
                      {"INSERT INTO snap_t VALUES ('b') RETURNING id", NULL, 0, NULL},
                      {"SELECT count(*) FROM snap_t", NULL, 0, NULL}};
  assert_int_equal(db_exec_all(c, &a, reads, 3), DB_OK);
  assert_int_equal(db_int(reads[0].res, 0, 0), 1);
  assert_string_equal(db_text(reads[1].res, 0, 0), "b");
  assert_int_equal(db_int(reads[2].res, 0, 0), 1); /* the snapshot of the first read */
  db_res *r;
  assert_int_equal(db_exec(c, &a, &r, "SELECT count(*) FROM snap_t", DB_NOARGS), DB_OK);
  assert_int_equal(db_int(r, 0, 0), 2); /* ended: the next read sees the commit */
  db_release(c);
  arena_fini(&a);
}

/* The token's check (db_guard) waits for the request's next statement: a read runs with it in
 * one read transaction, anything else after it alone; no row refuses the request, and nothing
 * of it runs after. */
static void test_guard(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, NULL, "CREATE TABLE guard_t (id TEXT PRIMARY KEY)", DB_NOARGS), DB_OK);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO guard_t VALUES ('a')", DB_NOARGS), DB_OK);
  bool found = false;
  db_guard_clear();
  db_guard_defer(true);
  db_trips_clear();
  assert_int_equal(db_guard(&found, "SELECT 1 FROM guard_t WHERE id = $1", DB_ARGS(DB_TEXT("a"))), DB_OK);
  assert_true(found);
  assert_int_equal(db_trips(), 0);
  assert_int_equal(db_query(&a, &r, "SELECT count(*) FROM guard_t", DB_NOARGS), DB_OK);
  assert_int_equal(db_int(r, 0, 0), 1);
  assert_int_equal(db_trips(), 2); /* together, in one read transaction; each statement counts */
  assert_false(db_guard_refused());

  /* before a write: the guard alone, then the write */
  db_guard_clear();
  db_trips_clear();
  assert_int_equal(db_guard(&found, "SELECT 1 FROM guard_t WHERE id = $1", DB_ARGS(DB_TEXT("a"))), DB_OK);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO guard_t VALUES ('b')", DB_NOARGS), DB_OK);
  assert_int_equal(db_trips(), 2);
  assert_false(db_guard_refused());

  /* no row: the read and everything after it refused, nothing written */
  for (int write_first = 0; write_first < 2; write_first++) {
    db_guard_clear();
    assert_int_equal(db_guard(&found, "SELECT 1 FROM guard_t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
    if (write_first) {
      db_conn *c;
      err_t e = db_begin(&c);
      if (!e) e = db_to_err(db_exec(c, NULL, NULL, "INSERT INTO guard_t VALUES ('refused')", DB_NOARGS));
      assert_int_not_equal(db_end(c, e), ERR_OK);
    } else {
      assert_int_not_equal(db_query(&a, &r, "SELECT count(*) FROM guard_t", DB_NOARGS), DB_OK);
    }
    assert_true(db_guard_refused());
    assert_int_not_equal(db_query(&a, NULL, "INSERT INTO guard_t VALUES ('later')", DB_NOARGS), DB_OK);
  }
  db_guard_clear();
  db_guard_defer(false);
  assert_int_equal(db_query(&a, &r, "SELECT count(*) FROM guard_t", DB_NOARGS), DB_OK);
  assert_int_equal(db_int(r, 0, 0), 2);

  /* a guard still waiting when the request ends runs on its own */
  db_guard_defer(true);
  assert_int_equal(db_guard(&found, "SELECT 1 FROM guard_t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
  db_trips_clear();
  assert_true(db_guard_refused());
  assert_int_equal(db_trips(), 1);
  db_guard_clear();
  /* not deferred: it runs at once and says what it found */
  db_guard_defer(false);
  assert_int_equal(db_guard(&found, "SELECT 1 FROM guard_t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
  assert_false(found);
  assert_false(db_guard_refused());
  arena_fini(&a);
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_deferred_statements_run_at_once), cmocka_unit_test(test_guard),
          cmocka_unit_test(test_reads_together_see_one_snapshot),
          cmocka_unit_test(test_select_star_after_schema_change), cmocka_unit_test(test_cells),
          cmocka_unit_test(test_group_commit), cmocka_unit_test(test_full_database_during_group_commit),
          cmocka_unit_test(test_on_commit), cmocka_unit_test(test_before_commit))

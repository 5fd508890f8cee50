/* Unit tests for src/db/postgres.c and the batching of src/db/db.c against a private PostgreSQL
 * cluster this test starts (initdb and pg_ctl in a temporary directory, as the postgres user
 * when run as root; skipped when the server binaries are not installed): a transaction's BEGIN,
 * its deferred statements and its COMMIT in as few round trips as the statements allow, a
 * failure among deferred statements rolling the transaction back, the guard keeping a write
 * from running, independent reads in one round trip, named and unnamed statements, and a
 * connection that the server dropped made again. */
#include "core/config.h"
#include "db/db.h"
#include "unit.h"
#include "unit_db.h"
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], bindir[256], url[128];
static int port;
static bool started;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[1024], full[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  if (getuid() == 0)
    snprintf(full, sizeof full, "runuser -u postgres -- %s >/dev/null 2>&1", cmd);
  else
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
  return system(full);
}

static int cluster_up(void **state) {
  (void)state;
  glob_t g;
  if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &g) != 0) return 0; /* no server: tests skip */
  snprintf(bindir, sizeof bindir, "%s", g.gl_pathv[g.gl_pathc - 1]);
  globfree(&g);
  *strrchr(bindir, '/') = 0;
  snprintf(dir, sizeof dir, "/tmp/mp-unit-pg-%d", (int)getpid());
  char cmd[256];
  snprintf(cmd, sizeof cmd, "mkdir -p %s && chmod 755 %s", dir, dir);
  if (system(cmd) != 0) return -1;
  snprintf(cmd, sizeof cmd, "chown postgres %s", dir);
  if (getuid() == 0 && system(cmd) != 0) return -1;
  if (sh("%s/initdb -D %s/data -A trust -U postgres --no-sync", bindir, dir) != 0) return -1;
  for (int attempt = 0; attempt < 5 && !started; attempt++) {
    port = 20000 + (int)((getpid() * 7 + attempt * 131) % 30000);
    started = sh("%s/pg_ctl -D %s/data -l %s/log -w start -o '-p %d -k %s -c listen_addresses=127.0.0.1 "
                 "-c fsync=off -c max_connections=50'",
                 bindir, dir, dir, port, dir) == 0;
  }
  if (!started) return -1;
  snprintf(url, sizeof url, "postgres://postgres@127.0.0.1:%d/postgres", port);
  char err[256];
  CFG.http_threads = 1;
  CFG.pg_prepared_statements = 1;
  if (!db_open(url, 2, 1, err)) return -1;
  arena a;
  arena_init(&a);
  db_rc rc = db_query(&a, NULL, "CREATE TABLE t (id TEXT PRIMARY KEY, n BIGINT NOT NULL)", DB_NOARGS);
  arena_fini(&a);
  return rc == DB_OK ? 0 : -1;
}

static int cluster_down(void **state) {
  (void)state;
  if (!started) return 0;
  db_close();
  sh("%s/pg_ctl -D %s/data -m immediate -w stop", bindir, dir);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void need_cluster(void) {
  if (!started) skip();
}

static int64_t count_of(const char *id) { return unit_db_count("SELECT count(*) FROM t WHERE id = $1", id); }

/* BEGIN rides with the first statement, deferred inserts with the COMMIT: a read and two
 * inserts in two round trips, the inserts' parameters copied (the caller's buffer changes). */
static void test_transaction_in_two_round_trips(void **state) {
  (void)state;
  need_cluster();
  arena a;
  arena_init(&a);
  db_conn *c;
  db_trips_clear();
  err_t e = db_begin(&c);
  assert_int_equal(db_trips(), 0);
  db_res *r;
  if (!e) e = db_to_err(db_exec(c, &a, &r, "SELECT count(*) AS n FROM t", DB_NOARGS));
  assert_int_equal(db_trips(), 1);
  char id[8] = "tx-1";
  if (!e) e = db_to_err(db_exec_later(c, NULL, NULL, "INSERT INTO t VALUES ($1, $2)", DB_ARGS(DB_TEXT(id), DB_INT(1))));
  strcpy(id, "tx-2");
  db_res *returned;
  if (!e)
    e = db_to_err(db_exec_later(c, &a, &returned, "INSERT INTO t VALUES ($1, $2) RETURNING n * 10 AS ten",
                                DB_ARGS(DB_TEXT(id), DB_INT(2))));
  strcpy(id, "zzzz");
  assert_int_equal(db_trips(), 1);
  e = db_end(c, e);
  assert_int_equal(e, ERR_OK);
  assert_int_equal(db_trips(), 2);
  assert_non_null(returned);
  assert_string_equal(db_field(returned, 0, "ten"), "20");
  assert_int_equal(count_of("tx-1") + count_of("tx-2"), 2);
  arena_fini(&a);
}

/* A deferred insert that breaks a constraint fails the COMMIT it rode with: nothing of the
 * transaction stays, and the error is a conflict. A transaction with no statement sends none. */
static void test_failed_deferred_statement_rolls_back(void **state) {
  (void)state;
  need_cluster();
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(db_exec_later(c, NULL, NULL, "INSERT INTO t VALUES ('dup', 1)", DB_NOARGS));
  assert_int_equal(db_end(c, e), ERR_OK);
  e = db_begin(&c);
  if (!e) e = db_to_err(db_exec_later(c, NULL, NULL, "INSERT INTO t VALUES ('dup-other', 1)", DB_NOARGS));
  if (!e) e = db_to_err(db_exec_later(c, NULL, NULL, "INSERT INTO t VALUES ('dup', 2)", DB_NOARGS));
  assert_int_equal(db_end(c, e), ERR_CONFLICT);
  assert_int_equal(count_of("dup-other"), 0);
  db_trips_clear();
  e = db_begin(&c);
  assert_int_equal(db_end(c, e), ERR_OK);
  assert_int_equal(db_trips(), 0);
  /* the connection is clean afterwards: a statement outside a transaction commits */
  arena a;
  arena_init(&a);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO t VALUES ('after', 1)", DB_NOARGS), DB_OK);
  assert_int_equal(count_of("after"), 1);
  arena_fini(&a);
}

/* A deferred guard rides in front of the next statement: when it finds a row the statement runs
 * in the same round trip; when it finds none, the statement does not run, nothing later on the
 * thread runs either, and db_guard_refused() tells it. */
static void test_guard(void **state) {
  (void)state;
  need_cluster();
  arena a;
  arena_init(&a);
  bool found = false;
  db_guard_clear();
  db_guard_defer(true);
  db_trips_clear();
  assert_int_equal(db_guard(&found, "SELECT 1 FROM t WHERE id = $1", DB_ARGS(DB_TEXT("after"))), DB_OK);
  assert_true(found);
  assert_int_equal(db_trips(), 0);
  assert_int_equal(db_query(&a, NULL, "INSERT INTO t VALUES ('guarded-ok', 1)", DB_NOARGS), DB_OK);
  assert_int_equal(db_trips(), 1);
  assert_false(db_guard_refused());
  assert_int_equal(count_of("guarded-ok"), 1);

  db_guard_clear();
  assert_int_equal(db_guard(&found, "SELECT 1 FROM t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(db_exec(c, NULL, NULL, "INSERT INTO t VALUES ('guarded-no', 1)", DB_NOARGS));
  assert_int_not_equal(e, ERR_OK);
  assert_int_not_equal(db_end(c, e), ERR_OK);
  assert_true(db_guard_refused());
  assert_int_not_equal(db_query(&a, NULL, "INSERT INTO t VALUES ('guarded-later', 1)", DB_NOARGS), DB_OK);
  db_guard_clear();
  db_guard_defer(false);
  assert_int_equal(count_of("guarded-no") + count_of("guarded-later"), 0);

  /* a guard still waiting when the request ends runs on its own */
  db_guard_defer(true);
  assert_int_equal(db_guard(&found, "SELECT 1 FROM t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
  db_trips_clear();
  assert_true(db_guard_refused());
  assert_int_equal(db_trips(), 1);
  db_guard_clear();
  /* not deferred: it runs at once and says what it found */
  db_guard_defer(false);
  assert_int_equal(db_guard(&found, "SELECT 1 FROM t WHERE id = $1", DB_ARGS(DB_TEXT("nobody"))), DB_OK);
  assert_false(found);
  assert_false(db_guard_refused());
  arena_fini(&a);
}

/* Independent reads in one round trip, each with its own result. */
static void test_reads_in_one_round_trip(void **state) {
  (void)state;
  need_cluster();
  arena a;
  arena_init(&a);
  db_conn *c = db_acquire();
  db_read reads[3] = {
      {"SELECT n FROM t WHERE id = $1", (db_val[]){DB_TEXT("tx-1")}, 1, NULL},
      {"SELECT n FROM t WHERE id = $1", (db_val[]){DB_TEXT("tx-2")}, 1, NULL},
      {"SELECT count(*) FROM t WHERE n > $1", (db_val[]){DB_INT(0)}, 1, NULL},
  };
  db_trips_clear();
  assert_int_equal(db_exec_all(c, &a, reads, 3), DB_OK);
  db_release(c);
  assert_int_equal(db_trips(), 1);
  assert_int_equal(db_int(reads[0].res, 0, 0), 1);
  assert_int_equal(db_int(reads[1].res, 0, 0), 2);
  assert_true(db_int(reads[2].res, 0, 0) >= 4);
  arena_fini(&a);
}

/* Unnamed statements (PG_PREPARED_STATEMENTS=0, for PgBouncer in transaction pooling) give the
 * same answers, a new statement's first run costs one round trip with named ones too, and a
 * failing statement in a batch returns its error without spoiling the connection. */
static void test_named_and_unnamed_statements(void **state) {
  (void)state;
  need_cluster();
  arena a;
  arena_init(&a);
  db_res *r;
  for (int named = 0; named < 2; named++) {
    CFG.pg_prepared_statements = named;
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT $1::bigint + $2 AS s, %d AS named", named);
    db_trips_clear();
    assert_int_equal(db_query(&a, &r, sql, DB_ARGS(DB_INT(40), DB_INT(2))), DB_OK);
    assert_int_equal(db_trips(), 1);
    assert_string_equal(db_field(r, 0, "s"), "42");
    assert_int_equal(db_query(&a, &r, sql, DB_ARGS(DB_INT(1), DB_INT(2))), DB_OK);
    assert_string_equal(db_field(r, 0, "s"), "3");
    assert_int_equal(db_query(&a, NULL, "SELECT * FROM no_such_table", DB_NOARGS), DB_ERROR);
    assert_int_equal(db_query(&a, &r, sql, DB_ARGS(DB_INT(5), DB_INT(5))), DB_OK);
    assert_string_equal(db_field(r, 0, "s"), "10");
  }
  CFG.pg_prepared_statements = 1;
  arena_fini(&a);
}

/* The server ends every connection (a restart, a pooler recycling them): the next statement
 * outside a transaction reconnects and runs, named statements prepared again. */
static void test_connection_made_again(void **state) {
  (void)state;
  need_cluster();
  arena a;
  arena_init(&a);
  db_res *r;
  assert_int_equal(db_query(&a, &r, "SELECT n FROM t WHERE id = $1", DB_ARGS(DB_TEXT("tx-1"))), DB_OK);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "%s/psql -X -q -h 127.0.0.1 -p %d -U postgres -d postgres -c "
           "\"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'marketplace'\"",
           bindir, port);
  assert_int_equal(sh("%s", cmd), 0);
  for (int i = 0; i < 3; i++) { /* every connection of the pool, whichever is lent */
    assert_int_equal(db_query(&a, &r, "SELECT n FROM t WHERE id = $1", DB_ARGS(DB_TEXT("tx-1"))), DB_OK);
    assert_int_equal(db_int(r, 0, 0), 1);
  }
  db_unavailable_clear();
  arena_fini(&a);
}

UNIT_MAIN(cluster_up, cluster_down, cmocka_unit_test(test_transaction_in_two_round_trips),
          cmocka_unit_test(test_failed_deferred_statement_rolls_back), cmocka_unit_test(test_guard),
          cmocka_unit_test(test_reads_in_one_round_trip), cmocka_unit_test(test_named_and_unnamed_statements),
          cmocka_unit_test(test_connection_made_again))

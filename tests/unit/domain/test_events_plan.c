/* Unit test of the live-update pump's read of a round's recipients (src/domain/events/
 * events_store.c) on a migrated SQLite database without statistics, as the service runs it (it
 * runs no ANALYZE): every variant of the read starts from the round's events by position and
 * never reads the outbox through events_match, whose entries for a service span the whole
 * outbox (24 hours of events). Left to itself, SQLite started the read with a list of providers
 * from the list, and each round read every event of their services: 35 ms a round at 100,000
 * events, growing with the outbox. The API tests check who gets what; this checks the plan. */
#include "db/db.h"
#include "db/migrate.h"
#include "domain/events/events_store.h"
#include "unit.h"
#include "unit_db.h"
#include <string.h>

static int setup(void **state) {
  (void)state;
  unit_db_open("events-plan", 2);
  assert_true(db_migrate());
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unit_db_close();
  return 0;
}

/* The plan's steps (EXPLAIN QUERY PLAN's detail column) of the read, joined by " | ". */
static char *plan_of(arena *a, bool providers, bool among) {
  const char *sql = events_store_recipients_sql(false, providers, among);
  db_res *r;
  assert_int_equal(db_query(a, &r, arena_printf(a, "EXPLAIN QUERY PLAN %s", sql),
                            DB_ARGS(DB_INT(0), DB_INT(100), DB_TEXT("[\"p1\",\"p2\"]"))),
                   DB_OK);
  char *out = arena_strdup(a, "");
  for (int i = 0; i < r->rows; i++) out = arena_printf(a, "%s%s | ", out, db_text(r, i, r->cols - 1));
  return out;
}

static void test_every_read_starts_from_the_rounds_events(void **state) {
  (void)state;
  static const struct { bool providers, among; } reads[] = {{false, false}, {true, false}, {true, true}};
  for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
    arena a;
    arena_init(&a);
    char *plan = plan_of(&a, reads[i].providers, reads[i].among);
    print_message("providers %d, among %d: %s\n", reads[i].providers, reads[i].among, plan);
    assert_non_null(strstr(plan, "SEARCH e USING INDEX events_pos (pos>? AND pos<?)"));
    assert_null(strstr(plan, "events_match"));
    assert_null(strstr(plan, "SCAN e")); /* nor the whole outbox any other way */
    arena_fini(&a);
  }
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test_setup_teardown(test_every_read_starts_from_the_rounds_events, setup, teardown))

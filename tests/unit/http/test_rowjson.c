/* Unit tests for src/http/rowjson.c: the field kinds that shape more than one cell, written
 * from one row of a private SQLite database (a SELECT of literals): a nested object over a
 * joined row's aliased columns (RJ_OBJECT), another table's members in place (RJ_INCLUDE, with
 * and without a prefix), stored lists with [] for NULL (RJ_LIST) and a member written by its
 * own function from the row (RJ_FN). */
#include "http/rowjson.h"
#include "unit.h"
#include "unit_db.h"
#include <string.h>

static int setup(void **state) {
  (void)state;
  unit_db_open("rowjson", 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unit_db_close();
  return 0;
}

static const hs_rj_field PERSON[] = {{"id", "id", RJ_STR}, {"name", "name", RJ_STR}, {0}};

/* Writes both names of the row: a member that needs two cells. */
static void write_both(jw *w, const db_res *r, int row, const char *cell) {
  const char *other = db_field(r, row, "staff_name");
  jw_str(w, arena_printf(w->a, "%s+%s", cell, other ? other : "-"));
}

static const hs_rj_field ROW[] = {
    {"", "", RJ_INCLUDE, PERSON},
    {"staff", "staff_", RJ_OBJECT, PERSON},
    {"", "staff_", RJ_INCLUDE, (const hs_rj_field[]){{"staffName", "name", RJ_STR}, {0}}},
    {"tags", "tags", RJ_LIST},
    {"none", "no_tags", RJ_LIST},
    {"both", "name", RJ_FN, .write = write_both},
    {0},
};

/* The JSON of the first row that sql answers, written with ROW. */
static const char *written(arena *a, const char *sql) {
  db_res *r;
  assert_int_equal(db_query(a, &r, sql, NULL, 0), DB_OK);
  jw w;
  jw_init(&w, a, 0);
  hs_rj_object(&w, hs_rj_bind(a, ROW, r), r, 0);
  return jw_text(&w);
}

static void test_nested_included_lists_and_functions(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  assert_string_equal(written(&a, "SELECT 'e1' AS id, 'Ann' AS name, 's1' AS staff_id, 'Bo' AS staff_name, "
                                  "'[\"a\",\"b\"]' AS tags, NULL AS no_tags"),
                      "{\"id\":\"e1\",\"name\":\"Ann\",\"staff\":{\"id\":\"s1\",\"name\":\"Bo\"},\"staffName\":\"Bo\","
                      "\"tags\":[\"a\",\"b\"],\"none\":[],\"both\":\"Ann+Bo\"}");
  /* a column the result lacks writes null, in a nested object as anywhere */
  assert_string_equal(written(&a, "SELECT 'e2' AS id, 'Cy' AS name, '[]' AS tags"),
                      "{\"id\":\"e2\",\"name\":\"Cy\",\"staff\":{\"id\":null,\"name\":null},\"staffName\":null,"
                      "\"tags\":[],\"none\":[],\"both\":\"Cy+-\"}");
  arena_fini(&a);
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_nested_included_lists_and_functions))

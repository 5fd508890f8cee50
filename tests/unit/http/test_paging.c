/* Unit tests for src/http/paging.c: the statement's tail for keysets that run one way or mix
 * directions, the limit and cursor of a request, the page's cut and its next link, and a
 * cursor refused by any other list, path, scope or caller. Requests are hs_req values built
 * here, without a pipeline. */
#include "core/config.h"
#include "http/paging.h"
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const db_keyset DESC = {"things", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};
static const db_keyset MIXED = {
    "mixed", {{"is_primary", "p", 'i', true}, {"created_at", "c", 'i', false}, {"id", "id", 's', false}}};

static char secret[] = "paging-unit-secret-0123456789abcdef0123456";
static char public_url[] = "https://api.example";

static int setup(void **state) {
  (void)state;
  CFG.jwt_secret = secret, CFG.jwt_secret_len = strlen(secret);
  CFG.public_url = public_url;
  return 0;
}

/* A request for path?query (query: "limit=2&cursor=..."), by the caller role:id. */
static void request(hs_req *req, const char *path, const char *query, const char *role, const char *id) {
  memset(req, 0, sizeof *req);
  arena_init(&req->arena);
  req->path = path, req->query_string = query;
  req->auth.role = role, req->auth.id = id;
  req->query = arena_json(&req->arena, json_object());
  char *copy = arena_strdup(&req->arena, query ? query : "");
  for (char *save = NULL, *p = strtok_r(copy, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(p, '=');
    *eq = 0;
    json_object_set_new(req->query, p, !strcmp(p, "limit") ? json_integer(atoi(eq + 1)) : json_string(eq + 1));
  }
}

static void test_statement_tail(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  db_val args[DB_PAGE_ARGS(1)] = {DB_TEXT("u1")};
  int n = 1;
  db_page first = {.ks = &DESC, .limit = 0, .fetch = 50};
  assert_string_equal(db_page_sql(&a, &first, "SELECT * FROM t WHERE a = $1", args, &n),
                      "SELECT * FROM t WHERE a = $1 ORDER BY seq DESC, id DESC LIMIT $2");
  assert_int_equal(n, 2);
  assert_int_equal(args[1].i, 50);
  n = 1;
  db_page after = {.ks = &DESC, .limit = 10, .fetch = 11, .nkey = 2, .key = {DB_INT(7), DB_TEXT("c9")}};
  assert_string_equal(db_page_sql(&a, &after, "SELECT * FROM t WHERE a = $1", args, &n),
                      "SELECT * FROM t WHERE a = $1 AND (seq, id) < ($2, $3) ORDER BY seq DESC, id DESC LIMIT $4");
  assert_int_equal(n, 4);
  assert_int_equal(args[1].i, 7);
  assert_string_equal(args[2].s, "c9");
  assert_int_equal(args[3].i, 11);
  n = 1;
  db_page mixed = {.ks = &MIXED, .fetch = 0, .nkey = 3, .key = {DB_INT(1), DB_INT(5), DB_TEXT("c1")}};
  assert_string_equal(db_page_sql(&a, &mixed, "SELECT * FROM t WHERE a = $1", args, &n),
                      "SELECT * FROM t WHERE a = $1 AND ((is_primary < $2) OR (is_primary = $2 AND created_at > $3) OR "
                      "(is_primary = $2 AND created_at = $3 AND id > $4)) ORDER BY is_primary DESC, created_at, id");
  assert_int_equal(n, 4); /* every row: no LIMIT */
  arena_fini(&a);
}

/* Three rows of DESC's columns: (30, c3), (20, c2), (10, c1). */
static db_res *three_rows(arena *a) {
  static char *names[] = {"seq", "id"};
  static char *cells[] = {"30", "c3", "20", "c2", "10", "c1"};
  static uint32_t lens[] = {2, 2, 2, 2, 2, 2};
  db_res *r = arena_alloc(a, sizeof *r);
  *r = (db_res){.rows = 3, .cols = 2, .colnames = names, .cells = cells, .lens = lens};
  return r;
}

static void test_limit_cut_and_next_link(void **state) {
  (void)state;
  hs_req req;
  db_page pg;
  request(&req, "/things", "q=x y&limit=2&cursor=old", "user", "u1"); /* as parsed: the Link encodes it */
  json_object_del(req.query, "cursor");
  assert_int_equal(hs_page_begin(&req, &DESC, NULL, 50, &pg), ERR_OK);
  assert_int_equal(pg.limit, 2);
  assert_int_equal(pg.fetch, 3);
  db_res *r = three_rows(&req.arena);
  assert_int_equal(hs_page_end(&req, &pg, r), ERR_OK);
  assert_int_equal(r->rows, 2);
  assert_non_null(pg.next);
  char want[512];
  snprintf(want, sizeof want, "<https://api.example/things?q=x%%20y&limit=2&cursor=%s>; rel=\"next\"", pg.next);
  assert_string_equal(req.res_link, want);
  /* a last page announces nothing */
  db_page last;
  assert_int_equal(hs_page_begin(&req, &DESC, NULL, 50, &last), ERR_OK);
  db_res *two = three_rows(&req.arena);
  two->rows = 2;
  req.res_link = NULL;
  assert_int_equal(hs_page_end(&req, &last, two), ERR_OK);
  assert_null(last.next);
  assert_null(req.res_link);
  /* unpaged: the list's cap, the whole result, nothing announced */
  hs_req plain;
  request(&plain, "/things", NULL, "user", "u1");
  assert_int_equal(hs_page_begin(&plain, &DESC, NULL, 50, &last), ERR_OK);
  assert_int_equal(last.limit, 0);
  assert_int_equal(last.fetch, 50);
  db_res *all = three_rows(&plain.arena);
  assert_int_equal(hs_page_end(&plain, &last, all), ERR_OK);
  assert_int_equal(all->rows, 3);
  assert_null(plain.res_link);
  arena_fini(&plain.arena);
  arena_fini(&req.arena);
}

/* The next page's cursor, made by path/scope/role/id. */
static const char *cursor_for(const char *path, const char *scope, const char *role, const char *id, arena *keep) {
  hs_req req;
  db_page pg;
  request(&req, path, "limit=2", role, id);
  hs_page_begin(&req, &DESC, scope, 0, &pg);
  hs_page_end(&req, &pg, three_rows(&req.arena));
  const char *cursor = arena_strdup(keep, pg.next);
  arena_fini(&req.arena);
  return cursor;
}

/* Whether path/scope/role/id take cursor (on the keyset ks). */
static bool takes(const db_keyset *ks, const char *path, const char *scope, const char *role, const char *id,
                  const char *cursor) {
  hs_req req;
  db_page pg;
  request(&req, path, NULL, role, id);
  json_object_set_new(req.query, "cursor", json_string(cursor));
  err_t e = hs_page_begin(&req, ks, scope, 0, &pg);
  bool ok = e == ERR_OK;
  if (ok) {
    assert_int_equal(pg.nkey, 2);
    assert_int_equal(pg.key[0].i, 20); /* after the page's last row, (20, c2) */
    assert_string_equal(pg.key[1].s, "c2");
    assert_int_equal(pg.limit, HS_PAGE_MAX); /* a cursor alone pages by the most */
  } else {
    assert_int_equal(req.err, ERR_BAD_REQUEST);
    assert_string_equal(req.err_message, "cursor: is not valid");
    assert_string_equal(req.err_field, "cursor");
  }
  arena_fini(&req.arena);
  return ok;
}

static void test_cursor_belongs_to_its_list(void **state) {
  (void)state;
  arena a;
  arena_init(&a);
  const char *c = cursor_for("/jobs/j1/messages", "p1", "user", "u1", &a);
  assert_true(takes(&DESC, "/jobs/j1/messages", "p1", "user", "u1", c));
  assert_false(takes(&DESC, "/jobs/j2/messages", "p1", "user", "u1", c)); /* another job's thread */
  assert_false(takes(&DESC, "/jobs/j1/messages", "p2", "user", "u1", c)); /* another thread of the job */
  assert_false(takes(&DESC, "/jobs/j1/messages", "p1", "user", "u2", c)); /* another account */
  assert_false(takes(&DESC, "/jobs/j1/messages", "p1", "provider", "u1", c));
  assert_false(takes(&MIXED, "/jobs/j1/messages", "p1", "user", "u1", c)); /* another list */
  size_t n = strlen(c);
  for (size_t i = 0; i < n; i++) { /* any character changed */
    char *bad = arena_strdup(&a, c);
    bad[i] = bad[i] == 'A' ? 'B' : 'A';
    assert_false(takes(&DESC, "/jobs/j1/messages", "p1", "user", "u1", bad));
  }
  static const char *const junk[] = {"x", ".", "W10", "W10.", "!!!.00000000000000000000000000000000"};
  for (size_t i = 0; i < sizeof junk / sizeof *junk; i++)
    assert_false(takes(&DESC, "/jobs/j1/messages", "p1", "user", "u1", junk[i]));
  arena_fini(&a);
}

UNIT_MAIN(setup, NULL, cmocka_unit_test(test_statement_tail), cmocka_unit_test(test_limit_cut_and_next_link),
          cmocka_unit_test(test_cursor_belongs_to_its_list))

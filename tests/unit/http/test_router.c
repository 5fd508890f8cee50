/* Unit tests for src/http/router.c. The router keeps process-wide state and is built once,
 * so one table is compiled in the group setup and every test reads it. */
#include "core/config.h"
#include "http/router.h"
#include "unit.h"
#include <string.h>

static err_t dummy(hs_req *req) {
  (void)req;
  return ERR_OK;
}

/* Summaries double as row names. Pairs that compete are listed in both orders. */
static const hs_route table[] = {
    {.method = HS_GET, .path = "/", .handler = dummy, .summary = "root"},
    {.method = HS_GET, .path = "/jobs", .handler = dummy, .summary = "list jobs"},
    {.method = HS_POST, .path = "/jobs", .handler = dummy, .summary = "create job"},
    {.method = HS_GET, .path = "/jobs/:id", .handler = dummy, .summary = "get job"},
    {.method = HS_GET, .path = "/jobs/reportable", .handler = dummy, .summary = "reportable jobs"},
    {.method = HS_PATCH, .path = "/jobs/:id", .handler = dummy, .summary = "update job"},
    {.method = HS_DELETE, .path = "/jobs/:id", .handler = dummy, .summary = "delete job"},
    {.method = HS_GET, .path = "/jobs/:id/messages", .handler = dummy, .summary = "list messages"},
    {.method = HS_POST, .path = "/jobs/:id/messages", .handler = dummy, .summary = "post message"},
    {.method = HS_GET, .path = "/quotes/mine", .handler = dummy, .summary = "my quotes"},
    {.method = HS_GET, .path = "/quotes/:id", .handler = dummy, .summary = "get quote"},
    {.method = HS_PUT, .path = "/users/:userId/jobs/:jobId", .handler = dummy, .summary = "user job"},
    {.method = HS_GET, .path = "/a/:x/c", .handler = dummy, .summary = "a x c"},
    {.method = HS_GET, .path = "/a/b/:y", .handler = dummy, .summary = "a b y"},
    {.method = HS_GET, .path = "/app/*path", .handler = dummy, .summary = "app rest"},
    {.method = HS_GET, .path = "/app", .handler = dummy, .summary = "app page"},
    {.method = HS_GET, .path = "/app/app.js", .handler = dummy, .summary = "app script"},
    {.method = HS_GET, .path = "/app/x/:id", .handler = dummy, .summary = "app x id"},
    {.method = HS_POST, .path = "/gated/test", .handler = dummy, .flags = ROUTE_TEST_ONLY, .summary = "test only"},
    {.method = HS_POST, .path = "/gated/dev", .handler = dummy, .flags = ROUTE_DEV_ONLY, .summary = "dev only"},
    {.method = HS_GET, .path = "/gated/:any", .handler = dummy, .summary = "gated any"},
};
#define NROUTES (sizeof table / sizeof table[0])

static int group_setup(void **state) {
  (void)state;
  hs_router_build(table, NROUTES);
  return 0;
}

static int req_setup(void **state) {
  static hs_req req;
  memset(&req, 0, sizeof req);
  arena_init(&req.arena);
  *state = &req;
  return 0;
}

static int req_teardown(void **state) {
  hs_req *req = *state;
  arena_fini(&req->arena);
  return 0;
}

/* Matches and checks the row by its summary (NULL: expect no match). */
static const hs_route *expect_match(hs_req *req, int method, const char *path, const char *summary) {
  req->nparams = -1; /* must be reset by a match */
  const hs_route *r = hs_router_match(method, path, req);
  if (!summary) {
    if (r) fail_msg("%s %s matched \"%s\", want no match", hs_method_name(method), path, r->summary);
    return NULL;
  }
  if (!r) fail_msg("%s %s matched nothing, want \"%s\"", hs_method_name(method), path, summary);
  if (strcmp(r->summary, summary))
    fail_msg("%s %s matched \"%s\", want \"%s\"", hs_method_name(method), path, r->summary, summary);
  assert_int_equal(r->method, method);
  assert_ptr_equal(r->handler, dummy);
  return r;
}

static void test_static_segments(void **state) {
  hs_req *req = *state;
  expect_match(req, HS_GET, "/", "root");
  expect_match(req, HS_GET, "/jobs", "list jobs");
  expect_match(req, HS_POST, "/jobs", "create job");
  assert_int_equal(req->nparams, 0);
}

static void test_static_beats_param(void **state) {
  hs_req *req = *state;
  /* param row listed first */
  expect_match(req, HS_GET, "/jobs/reportable", "reportable jobs");
  assert_int_equal(req->nparams, 0);
  /* static row listed first */
  expect_match(req, HS_GET, "/quotes/mine", "my quotes");
  assert_int_equal(req->nparams, 0);
  /* other values still reach the param rows */
  expect_match(req, HS_GET, "/jobs/reportables", "get job");
  assert_string_equal(hs_param(req, "id"), "reportables");
  expect_match(req, HS_GET, "/quotes/q1", "get quote");
  assert_string_equal(hs_param(req, "id"), "q1");
  /* the earliest static segment decides: /a/b/:y beats /a/:x/c for /a/b/c */
  expect_match(req, HS_GET, "/a/b/c", "a b y");
  assert_string_equal(hs_param(req, "y"), "c");
  expect_match(req, HS_GET, "/a/z/c", "a x c");
  assert_string_equal(hs_param(req, "x"), "z");
}

static void test_params_extracted(void **state) {
  hs_req *req = *state;
  char path[] = "/jobs/cjld2cjxh0000qzrmn831i7rn/messages";
  expect_match(req, HS_GET, path, "list messages");
  assert_int_equal(req->nparams, 1);
  assert_string_equal(req->param_names[0], "id");
  assert_string_equal(req->param_values[0], "cjld2cjxh0000qzrmn831i7rn");
  assert_string_equal(hs_param(req, "id"), "cjld2cjxh0000qzrmn831i7rn");
  assert_null(hs_param(req, ":id"));
  assert_null(hs_param(req, "messages"));
  /* the value is a copy that outlives the caller's path buffer */
  memset(path, 'X', sizeof path - 1);
  assert_string_equal(hs_param(req, "id"), "cjld2cjxh0000qzrmn831i7rn");

  expect_match(req, HS_PUT, "/users/u-1/jobs/j-2", "user job");
  assert_int_equal(req->nparams, 2);
  assert_string_equal(hs_param(req, "userId"), "u-1");
  assert_string_equal(hs_param(req, "jobId"), "j-2");
  assert_string_equal(req->param_names[0], "userId");
  assert_string_equal(req->param_names[1], "jobId");

  /* a later match replaces earlier parameters */
  expect_match(req, HS_GET, "/jobs", "list jobs");
  assert_int_equal(req->nparams, 0);
  assert_null(hs_param(req, "userId"));
}

/* A last `*name` segment takes the rest of the path; every other matching row wins over it. */
static void test_rest_of_path(void **state) {
  hs_req *req = *state;
  expect_match(req, HS_GET, "/app", "app page");
  expect_match(req, HS_GET, "/app/app.js", "app script");
  expect_match(req, HS_GET, "/app/x/42", "app x id");
  assert_string_equal(hs_param(req, "id"), "42");
  expect_match(req, HS_GET, "/app/customers", "app rest");
  assert_string_equal(hs_param(req, "path"), "customers");
  expect_match(req, HS_GET, "/app/a/b//c/", "app rest");
  assert_int_equal(req->nparams, 1);
  assert_string_equal(hs_param(req, "path"), "a/b/c");
  expect_match(req, HS_GET, "/app/x/42/more", "app rest");
  assert_string_equal(hs_param(req, "path"), "x/42/more");
  expect_match(req, HS_GET, "/app/app.js/x", "app rest");
  expect_match(req, HS_GET, "/appx", NULL);
  expect_match(req, HS_POST, "/app/a", NULL);
  assert_int_equal(hs_router_methods("/app/a/b"), HS_GET);
}

static void test_method_matters(void **state) {
  hs_req *req = *state;
  expect_match(req, HS_GET, "/jobs/42", "get job");
  expect_match(req, HS_PATCH, "/jobs/42", "update job");
  expect_match(req, HS_DELETE, "/jobs/42", "delete job");
  expect_match(req, HS_POST, "/jobs/42/messages", "post message");
  expect_match(req, HS_PUT, "/jobs/42", NULL);
  expect_match(req, HS_POST, "/jobs/42", NULL);
  expect_match(req, HS_DELETE, "/jobs", NULL);
  expect_match(req, HS_PATCH, "/jobs/reportable", "update job"); /* no static PATCH row: the param row */
  assert_string_equal(hs_param(req, "id"), "reportable");
  expect_match(req, HS_POST, "/quotes/mine", NULL);
  expect_match(req, HS_GET, "/users/u/jobs/j", NULL);
}

static void test_slashes_tolerated(void **state) {
  hs_req *req = *state;
  expect_match(req, HS_GET, "/jobs/", "list jobs");
  expect_match(req, HS_GET, "//jobs", "list jobs");
  expect_match(req, HS_GET, "/jobs/42/", "get job");
  assert_string_equal(hs_param(req, "id"), "42");
  expect_match(req, HS_GET, "//jobs//42///messages//", "list messages");
  assert_string_equal(hs_param(req, "id"), "42");
  expect_match(req, HS_GET, "/jobs/reportable/", "reportable jobs");
  expect_match(req, HS_GET, "//", "root");
}

static void test_no_match(void **state) {
  hs_req *req = *state;
  expect_match(req, HS_GET, "/nope", NULL);
  expect_match(req, HS_GET, "/job", NULL);
  expect_match(req, HS_GET, "/JOBS", NULL);
  expect_match(req, HS_GET, "/jobs/42/messages/7", NULL);
  expect_match(req, HS_GET, "/jobs/42/message", NULL);
  expect_match(req, HS_GET, "/a/b", NULL);
  expect_match(req, HS_GET, "/quotes", NULL);
  /* more segments than the router splits, and an over-long path */
  char many[128] = "";
  for (int i = 0; i < HS_MAX_SEGMENTS + 1; i++) strcat(many, "/s");
  expect_match(req, HS_GET, many, NULL);
  static char longpath[4096];
  memset(longpath, 'x', sizeof longpath - 1);
  longpath[0] = '/';
  strcpy(longpath + 1, "jobs/");
  longpath[6] = 'x';
  expect_match(req, HS_GET, longpath, NULL);
  assert_int_equal(hs_router_methods(longpath), 0);
}

static void test_methods_for_path(void **state) {
  (void)state;
  assert_int_equal(hs_router_methods("/jobs"), HS_GET | HS_POST);
  assert_int_equal(hs_router_methods("/jobs/"), HS_GET | HS_POST);
  assert_int_equal(hs_router_methods("/jobs/42"), HS_GET | HS_PATCH | HS_DELETE);
  assert_int_equal(hs_router_methods("/jobs/reportable"), HS_GET | HS_PATCH | HS_DELETE);
  assert_int_equal(hs_router_methods("/jobs/42/messages"), HS_GET | HS_POST);
  assert_int_equal(hs_router_methods("/users/1/jobs/2"), HS_PUT);
  assert_int_equal(hs_router_methods("/quotes/mine"), HS_GET);
  assert_int_equal(hs_router_methods("/"), HS_GET);
  assert_int_equal(hs_router_methods("/nope"), 0);
  assert_int_equal(hs_router_methods("/jobs/1/2/3"), 0);
}

static void test_routes_and_counts(void **state) {
  hs_req *req = *state;
  size_t n = 0;
  const hs_route *rows = hs_router_routes(&n);
  assert_int_equal(n, NROUTES);
  for (size_t i = 0; i < n; i++) {
    assert_string_equal(rows[i].path, table[i].path);
    assert_int_equal(rows[i].method, table[i].method);
  }
  /* a match returns a row of that table */
  const hs_route *r = expect_match(req, HS_POST, "/jobs/1/messages", "post message");
  assert_true(r >= rows && r < rows + n);
  size_t idx = (size_t)(r - rows);
  long hits = -1, ok = -1;
  hs_router_counts(idx, &hits, &ok);
  assert_int_equal(hits, 0);
  assert_int_equal(ok, 0);
  hs_router_count(r, 201);
  hs_router_count(r, 304);
  hs_router_count(r, 400);
  hs_router_count(r, 500);
  hs_router_counts(idx, &hits, &ok);
  assert_int_equal(hits, 4);
  assert_int_equal(ok, 2);
  hs_router_counts(0, &hits, &ok); /* other rows are untouched */
  assert_int_equal(hits, 0);
}

/* Rows that exist only in some environments are not matched, and not offered to a
 * preflight, anywhere else: the path then behaves as if the row were absent. */
static void test_environment_gates(void **state) {
  hs_req *req = *state;
  app_env saved = CFG.env;
  CFG.env = ENV_TEST;
  expect_match(req, HS_POST, "/gated/test", "test only");
  expect_match(req, HS_POST, "/gated/dev", "dev only");
  assert_int_equal(hs_router_methods("/gated/test"), HS_GET | HS_POST);
  CFG.env = ENV_DEVELOPMENT;
  expect_match(req, HS_POST, "/gated/test", NULL);
  expect_match(req, HS_GET, "/gated/test", "gated any");
  expect_match(req, HS_POST, "/gated/dev", "dev only");
  assert_int_equal(hs_router_methods("/gated/test"), HS_GET);
  CFG.env = ENV_PRODUCTION;
  expect_match(req, HS_POST, "/gated/test", NULL);
  expect_match(req, HS_POST, "/gated/dev", NULL);
  assert_int_equal(hs_router_methods("/gated/dev"), HS_GET);
  assert_false(hs_route_available(&table[NROUTES - 2]));
  CFG.env = saved;
}

static void test_method_names(void **state) {
  (void)state;
  const int bits[] = {HS_GET, HS_POST, HS_PUT, HS_PATCH, HS_DELETE};
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
    assert_int_equal(hs_method_bit(hs_method_name(bits[i])), bits[i]);
  assert_string_equal(hs_method_name(HS_PATCH), "PATCH");
  assert_int_equal(hs_method_bit("get"), 0);
  assert_int_equal(hs_method_bit("OPTIONS"), 0);
  assert_int_equal(hs_method_bit("POSTX"), 0);
  assert_int_equal(hs_method_bit("HEAD"), 0);
  assert_int_equal(hs_method_bit(""), 0);
  assert_string_equal(hs_method_name(HS_GET | HS_POST), "?");
}

UNIT_MAIN(group_setup, NULL, cmocka_unit_test_setup_teardown(test_static_segments, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_static_beats_param, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_params_extracted, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_method_matters, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_rest_of_path, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_slashes_tolerated, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_no_match, req_setup, req_teardown),
          cmocka_unit_test(test_methods_for_path),
          cmocka_unit_test_setup_teardown(test_routes_and_counts, req_setup, req_teardown),
          cmocka_unit_test_setup_teardown(test_environment_gates, req_setup, req_teardown),
          cmocka_unit_test(test_method_names))

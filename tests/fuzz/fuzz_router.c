/* The router and query strings: the first byte picks the method, the rest is a request target
 * ("/path?query", as MHD passes it: the path decoded, the query raw). The route's query
 * schema then validates what hs_query_parse() collected, as the server does. Properties: a
 * matched route has the request's method and one value per ':param'; every collected
 * argument is a string. */
#include "core/arena.h"
#include "fuzz.h"
#include "http/http.h"
#include "http/router.h"
#include "http/schema.h"
#include "domains.h"
#include <jansson.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  domains_install_routes();
  return 0;
}

static int count_params(const char *pattern) {
  int n = 0;
  for (const char *p = pattern; *p; p++) n += *p == ':';
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const int methods[] = {HS_GET, HS_POST, HS_PUT, HS_PATCH, HS_DELETE};
  int method = methods[data[0] % 5];
  char *target = fuzz_strndup(data + 1, size - 1);
  char *query = strchr(target, '?');
  if (query) *query++ = 0;
  hs_req req;
  memset(&req, 0, sizeof req);
  arena_init(&req.arena);
  const hs_route *r = hs_router_match(method, target, &req);
  int methods_for_path = hs_router_methods(target);
  if (r) {
    FUZZ_CHECK(r->method == method, "route %s matched another method", r->path);
    FUZZ_CHECK(methods_for_path & method, "hs_router_methods disagrees with hs_router_match on %s", r->path);
    FUZZ_CHECK(req.nparams == count_params(r->path), "%d values for %s", req.nparams, r->path);
    for (int i = 0; i < req.nparams; i++) FUZZ_CHECK(req.param_values[i][0], "empty :%s", req.param_names[i]);
  }
  json_t *args = json_object();
  hs_query_parse(query, args);
  const char *key;
  json_t *value;
  /* a key given once is a string; a repeated one (a list filter: status=A&status=B) an array of them */
  json_object_foreach(args, key, value) {
    if (json_is_array(value)) {
      size_t i;
      json_t *item;
      json_array_foreach(value, i, item) FUZZ_CHECK(json_is_string(item), "argument %s[%zu] is not a string", key, i);
    } else
      FUZZ_CHECK(json_is_string(value), "argument %s is not a string", key);
  }
  if (r && r->query) {
    char err[256];
    json_decref(hs_validate(r->query, args, true, err));
  }
  json_decref(args);
  arena_fini(&req.arena);
  free(target);
  return 0;
}

/* JSON request bodies through jansson and the declarative validation of every schema in the
 * route table (bodies, queries and upload forms), as the server runs them: the input is the
 * body, validated against every schema in turn (the first byte says whether query schemas
 * see it as a query, with strings to convert). Properties: a failure names a field in a non-empty
 * message; what validation accepts, validated again, is accepted unchanged (normalisation is
 * idempotent). */
#include "fuzz.h"
#include "http/router.h"
#include "http/schema.h"
#include "domains.h"
#include <jansson.h>
#include <string.h>

typedef struct {
  const hs_schema *schema;
  bool from_query;
} entry;

static entry schemas[256];
static size_t nschemas;

static void add(const hs_schema *s, bool from_query) {
  if (!s || nschemas == sizeof schemas / sizeof *schemas) return;
  for (size_t i = 0; i < nschemas; i++)
    if (schemas[i].schema == s && schemas[i].from_query == from_query) return;
  schemas[nschemas++] = (entry){s, from_query};
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  domains_install_routes();
  size_t n;
  const hs_route *routes = hs_router_routes(&n);
  for (size_t i = 0; i < n; i++) {
    add(routes[i].body, false);
    add(routes[i].query, true);
    if (routes[i].upload) add(routes[i].upload->fields, true);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  json_t *input = json_loadb((const char *)data + 1, size - 1, JSON_ALLOW_NUL, NULL);
  if (!json_is_object(input)) { /* the server answers 400 before validation */
    json_decref(input);
    return 0;
  }
  for (size_t i = 0; i < nschemas; i++) {
    const entry *e = &schemas[i];
    char err[256] = "";
    json_t *out = hs_validate(e->schema, input, e->from_query && (data[0] & 1), err);
    if (!out) {
      FUZZ_CHECK(err[0] && strstr(err, ": "), "empty or unnamed validation message '%s'", err);
      continue;
    }
    char again_err[256] = "";
    json_t *again = hs_validate(e->schema, out, false, again_err);
    FUZZ_CHECK(again != NULL, "accepted output refused on a second pass: %s", again_err);
    FUZZ_CHECK(json_equal(again, out), "normalisation is not idempotent");
    json_decref(again);
    json_decref(out);
  }
  json_decref(input);
  return 0;
}

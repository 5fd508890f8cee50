/* The ISO 8601 parser every date-time field and query goes through (clock_parse_iso, and the
 * schema's F_DATETIME rule over it). Properties: an accepted instant formats back to text that
 * parses to the same instant; the schema accepts exactly what the parser accepts. */
#include "core/clock.h"
#include "fuzz.h"
#include "http/schema.h"
#include <jansson.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

static const hs_field fields[] = {{"at", F_DATETIME, F_REQUIRED}, {0}};
static const hs_schema schema = {fields};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = fuzz_strndup(data, size);
  int64_t ms = 0;
  bool ok = clock_parse_iso(s, &ms);
  if (ok && ms >= 0 && ms < 253402300800000LL) { /* years 1970..9999 format as 4 digits */
    char iso[25];
    clock_format_iso(ms, iso);
    int64_t back = -1;
    FUZZ_CHECK(clock_parse_iso(iso, &back) && back == ms, "'%s' -> %lld -> '%s' -> %lld", s, (long long)ms, iso,
               (long long)back);
  }
  json_t *v = json_stringn(s, size);
  if (v && strlen(s) == size) {
    json_t *in = json_pack("{s:o}", "at", v);
    char err[256];
    json_t *out = hs_validate(&schema, in, false, err);
    FUZZ_CHECK((out != NULL) == ok, "schema %s what the parser %s: '%s'", out ? "accepts" : "refuses",
               ok ? "accepts" : "refuses", s);
    json_decref(out);
    json_decref(in);
  } else {
    json_decref(v);
  }
  free(s);
  return 0;
}

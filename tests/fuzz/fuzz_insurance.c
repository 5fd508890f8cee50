/* Insurance certificate recognition (recognize_insurance) over arbitrary text. Properties: a
 * status from the table, dates that are empty or real ISO dates, coverage empty or digits,
 * and a summary only when at least two fields were found. */
#include "domain/providers/recognition.h"
#include "fuzz.h"
#include <ctype.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_strndup(data, size);
  insurance_result r;
  recognize_insurance(text, FUZZ_NOW_MS, &r);
  FUZZ_CHECK(!strcmp(r.status, "active") || !strcmp(r.status, "expired") || !strcmp(r.status, "review") ||
                 !strcmp(r.status, "error"),
             "status '%s'", r.status);
  fuzz_check_iso_date("effective", r.effective);
  fuzz_check_iso_date("expiry", r.expiry);
  for (const char *c = r.coverage; *c; c++) FUZZ_CHECK(isdigit((unsigned char)*c), "coverage '%s'", r.coverage);
  FUZZ_CHECK(r.fields_found >= 0 && r.fields_found <= 5, "%d fields", r.fields_found);
  FUZZ_CHECK(!r.summary[0] || r.fields_found >= 2, "summary with %d field(s)", r.fields_found);
  FUZZ_CHECK(r.nflags >= 0 && r.nflags <= 8, "%d flags", r.nflags);
  free(text);
  return 0;
}

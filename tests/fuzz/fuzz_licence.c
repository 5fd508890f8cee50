/* Licence recognition (recognize_licence) over arbitrary OCR text; the first byte is the OCR
 * confidence. Properties: a status from the specification's table, flags from its list, and
 * dates that are empty or real ISO calendar dates. */
#include "domain/providers/recognition.h"
#include <stdbool.h>
#include "fuzz.h"
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

static bool one_of(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list)) return true;
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const char *const statuses[] = {"passed", "review", "failed", "error", NULL};
  static const char *const flags[] = {"unreadable", "not_a_license", "no_dob", "no_expiry",
                                      "expired",    "near_expiry",   NULL};
  char *text = fuzz_strndup(data + 1, size - 1);
  licence_result r;
  recognize_licence(text, data[0] / 255.0, FUZZ_NOW_MS, &r);
  FUZZ_CHECK(one_of(r.status, statuses), "status '%s'", r.status);
  FUZZ_CHECK(r.nflags >= 0 && r.nflags <= 8, "%d flags", r.nflags);
  for (int i = 0; i < r.nflags; i++) FUZZ_CHECK(one_of(r.flags[i], flags), "flag '%s'", r.flags[i]);
  fuzz_check_iso_date("dob", r.dob);
  fuzz_check_iso_date("expiry", r.expiry);
  FUZZ_CHECK(strlen(r.name) < sizeof r.name && strlen(r.state) < sizeof r.state, "unterminated field");
  free(text);
  return 0;
}

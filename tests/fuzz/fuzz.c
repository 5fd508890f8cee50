/* Set-up shared by the fuzz targets. */
#include "fuzz.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char data_dir[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  if (data_dir[0]) nftw(data_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void fuzz_setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(data_dir, sizeof data_dir, "%s/mp-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(data_dir)) abort();
  atexit(cleanup);
  setenv("APP_ENV", "test", 1);
  setenv("DATA_DIR", data_dir, 1);
  setenv("JWT_SECRET", FUZZ_JWT_SECRET, 1);
  char err[256] = "";
  if (!config_load(err)) {
    fprintf(stderr, "fuzz: %s\n", err);
    abort();
  }
  log_set_level((log_level)(LOG_ERROR + 1));
}

char *fuzz_strndup(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = 0;
  return s;
}

void fuzz_check_iso_date(const char *what, const char *d) {
  if (!*d) return;
  char iso[32];
  snprintf(iso, sizeof iso, "%.10sT00:00:00Z", d);
  int64_t ms;
  FUZZ_CHECK(strlen(d) == 10 && clock_parse_iso(iso, &ms), "%s '%s' is not an ISO date", what, d);
}

/* A driver that runs a fuzz target without libFuzzer (docs/internals/fuzzing.md): once on each
 * input, as libFuzzer's -runs=0 replay does, for `make fuzz-short` (part of `make test`). The
 * target is linked by gcc with the objects of the sanitized build the API tests already built,
 * so CI compiles nothing twice: libFuzzer's clang build is for timed fuzzing (`make fuzz`).
 *
 * Usage: replay [-max_len=N] PATH...   A file is run whole (a regression); each file of a
 * directory is cut to N bytes, as libFuzzer reads a corpus (4096 unless said). An input that
 * runs over 10 s fails the run, as libFuzzer's -timeout=10; a crash, a sanitizer's report or a
 * broken property (abort) ends it with the sanitizer's exit status. */
#include "fuzz.h"
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#define TIMEOUT_S 10

static char current[4096];
static int unreadable; /* paths that could not be read: they fail the run */

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "replay: an input ran over 10 s: ";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  ignored = write(2, current, strlen(current));
  ignored = write(2, "\n", 1);
  (void)ignored;
  _exit(70);
}

/* Runs the target on the file at path, cut to max_len bytes when max_len > 0; the number of
 * inputs run (0 when the file cannot be read: counted in unreadable). */
static int run_file(const char *path, long max_len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    unreadable++;
    return 0;
  }
  size_t cap = 4096, n = 0;
  uint8_t *data = malloc(cap);
  size_t got;
  while (data && (got = fread(data + n, 1, cap - n, f)) > 0)
    if ((n += got) == cap) data = realloc(data, cap *= 2);
  fclose(f);
  if (!data) abort();
  if (max_len > 0 && n > (size_t)max_len) n = (size_t)max_len;
  snprintf(current, sizeof current, "%s", path);
  alarm(TIMEOUT_S);
  LLVMFuzzerTestOneInput(data, n);
  alarm(0);
  free(data);
  return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* Runs the target on every regular file of the directory at path, each cut to max_len. */
static int run_dir(const char *path, long max_len) {
  struct dirent **names;
  int n = scandir(path, &names, NULL, by_name), ran = 0;
  if (n < 0) {
    perror(path);
    unreadable++;
    return 0;
  }
  for (int i = 0; i < n; i++) {
    char file[4096];
    snprintf(file, sizeof file, "%s/%s", path, names[i]->d_name);
    if (names[i]->d_type == DT_REG) ran += run_file(file, max_len);
    free(names[i]);
  }
  free(names);
  return ran;
}

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  LLVMFuzzerInitialize(&argc, &argv);
  long max_len = 4096;
  int inputs = 0, regressions = 0;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "-max_len=", 9)) {
      max_len = strtol(argv[i] + 9, NULL, 10);
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (d) {
      closedir(d);
      inputs += run_dir(argv[i], max_len);
    } else {
      int ran = run_file(argv[i], 0);
      inputs += ran, regressions += ran;
    }
  }
  printf("replayed %d inputs (%d regressions)\n", inputs, regressions);
  return unreadable ? 1 : 0;
}

/* See faults.h. The environment is read once. */
#include "core/faults.h"
#include "core/config.h"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *armed;
static char paused[64];
static int pause_ms;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_env(void) {
  if (CFG.env != ENV_TEST) return;
  armed = getenv("CRASH_POINT");
  const char *p = getenv("PAUSE_POINT"), *colon = p ? strrchr(p, ':') : NULL;
  if (colon && (size_t)(colon - p) < sizeof paused) {
    memcpy(paused, p, (size_t)(colon - p));
    pause_ms = atoi(colon + 1);
  }
}

void fault_point(const char *name) {
  pthread_once(&once, read_env);
  if (armed && !strcmp(armed, name)) raise(SIGKILL);
}

void fault_pause(const char *name) {
  pthread_once(&once, read_env);
  if (pause_ms <= 0 || strcmp(paused, name)) return;
  struct timespec t = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* See faults.h. The environment is read once. */
#include "core/faults.h"
#include "core/config.h"
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *armed, *plan_log;
static char paused[64], limited[64];
static int pause_ms, limit;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* "<name>:<n>" from the environment variable var: name into name[64], n into *n. */
static void named_number(const char *var, char name[64], int *n) {
  const char *p = getenv(var), *colon = p ? strrchr(p, ':') : NULL;
  if (colon && colon - p < 64) {
    memcpy(name, p, (size_t)(colon - p));
    *n = atoi(colon + 1);
  }
}

static void read_env(void) {
  if (CFG.env != ENV_TEST) return;
  armed = getenv("CRASH_POINT");
  named_number("PAUSE_POINT", paused, &pause_ms);
  named_number("TEST_LIMIT", limited, &limit);
  plan_log = getenv("PLAN_LOG");
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

int fault_limit(const char *name, int value) {
  pthread_once(&once, read_env);
  return limited[0] && !strcmp(limited, name) ? limit : value;
}

const char *fault_plan_log(void) {
  pthread_once(&once, read_env);
  return plan_log;
}

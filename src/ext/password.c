/* Bounded bcrypt pool: a ring of pending tasks, worker threads at nice 10 so request
 * threads preempt them, and a per-call condition variable for the waiting request. */
#include "ext/password.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include <crypt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct task {
  const char *password;
  const char *setting; /* a full hash (verify) or a salt setting (hash) */
  char output[128];
  bool ok, done;
  pthread_cond_t cv;
} task;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t work;
  task **ring;
  int cap, head, count;
  int idle, queue; /* idle workers; bound on waiting tasks */
  pthread_t *threads;
  int nthreads, cost;
  bool stopping;
  char dummy[128];
} P = {.mu = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};
static _Atomic long refusals;
static _Atomic long computations; /* bcrypt runs of the pool, at its cost */

/* cd is the caller's scratch space: hashing allocates nothing (see worker()). */
static bool run_crypt(const char *password, const char *setting, struct crypt_data *cd, char out[128]) {
  const char *h = crypt_rn(password, setting, cd, sizeof *cd);
  bool ok = h && h[0] != '*' && strlen(h) < 128;
  if (ok) strcpy(out, h);
  return ok;
}

bool password_hash_now(const char *password, int cost, char out[128]) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!crypt_gensalt_rn("$2b$", (unsigned long)cost, NULL, 0, salt, sizeof salt)) return false;
  struct crypt_data *cd = xcalloc(1, sizeof *cd);
  bool ok = run_crypt(password, salt, cd, out);
  free(cd);
  return ok;
}

static void *worker(void *arg) {
  (void)arg;
  setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
  struct crypt_data *cd = xcalloc(1, sizeof *cd);
  pthread_mutex_lock(&P.mu);
  for (;;) {
    P.idle++;
    while (P.count == 0 && !P.stopping) pthread_cond_wait(&P.work, &P.mu);
    P.idle--;
    if (P.count == 0 && P.stopping) break;
    task *t = P.ring[P.head];
    P.head = (P.head + 1) % P.cap, P.count--;
    pthread_mutex_unlock(&P.mu);
    t->ok = run_crypt(t->password, t->setting, cd, t->output);
    computations++;
    pthread_mutex_lock(&P.mu);
    t->done = true;
    pthread_cond_signal(&t->cv);
  }
  pthread_mutex_unlock(&P.mu);
  free(cd);
  return NULL;
}

void password_pool_start(int threads, int queue, int cost) {
  P.cost = cost;
  P.stopping = false;
  P.idle = 0, P.head = 0, P.count = 0;
  P.queue = queue;
  P.cap = queue + threads; /* room for a task per idle worker plus `queue` waiting */
  P.ring = xcalloc((size_t)P.cap, sizeof *P.ring);
  P.threads = xcalloc((size_t)threads, sizeof *P.threads);
  P.nthreads = threads;
  /* dummy hash for unknown accounts, same cost as real ones */
  if (!password_hash_now("dummy-password-for-timing", cost, P.dummy)) die("bcrypt is unavailable in libcrypt");
  for (int i = 0; i < threads; i++) pthread_create(&P.threads[i], NULL, worker, NULL);
  /* return once every worker waits for work, so the first request finds them idle */
  for (;;) {
    pthread_mutex_lock(&P.mu);
    bool ready = P.idle == threads;
    pthread_mutex_unlock(&P.mu);
    if (ready) break;
    usleep(1000);
  }
}

void password_pool_stop(void) {
  pthread_mutex_lock(&P.mu);
  P.stopping = true; /* reset by the next password_pool_start */
  pthread_cond_broadcast(&P.work);
  pthread_mutex_unlock(&P.mu);
  for (int i = 0; i < P.nthreads; i++) pthread_join(P.threads[i], NULL);
  free(P.threads);
  free(P.ring);
  P.threads = NULL, P.ring = NULL, P.nthreads = 0;
}

/* Queues t and waits for it; false when every worker is busy and `queue` tasks already
 * wait. Tasks leave the ring when a worker takes them. */
static bool submit(task *t) {
  pthread_cond_init(&t->cv, NULL);
  pthread_mutex_lock(&P.mu);
  if (P.count >= P.idle + P.queue || P.stopping) {
    pthread_mutex_unlock(&P.mu);
    pthread_cond_destroy(&t->cv);
    refusals++;
    return false;
  }
  P.ring[(P.head + P.count) % P.cap] = t;
  P.count++;
  pthread_cond_signal(&P.work);
  while (!t->done) pthread_cond_wait(&t->cv, &P.mu);
  pthread_mutex_unlock(&P.mu);
  pthread_cond_destroy(&t->cv);
  return true;
}

bool password_pool_full(void) {
  pthread_mutex_lock(&P.mu);
  bool full = P.count >= P.idle + P.queue || P.stopping;
  pthread_mutex_unlock(&P.mu);
  if (full) refusals++;
  return full;
}

void password_pool_stats(int *waiting, int *busy, long *refused, long *computed) {
  pthread_mutex_lock(&P.mu);
  *waiting = P.count;
  *busy = P.nthreads - P.idle;
  pthread_mutex_unlock(&P.mu);
  *refused = refusals;
  *computed = computations;
}

pw_result password_hash(const char *password, char out[128]) {
  if (!db_guard_passed()) return PW_ERROR; /* a refused token costs no bcrypt */
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!crypt_gensalt_rn("$2b$", (unsigned long)P.cost, NULL, 0, salt, sizeof salt)) return PW_ERROR;
  task t = {.password = password, .setting = salt};
  if (!submit(&t)) return PW_BUSY;
  if (!t.ok) return PW_ERROR;
  strcpy(out, t.output);
  return PW_OK;
}

pw_result password_verify(const char *password, const char *hash) {
  if (!db_guard_passed()) return PW_ERROR;
  bool known = hash && str_starts_with(hash, "$2");
  task t = {.password = password, .setting = known ? hash : P.dummy};
  if (!submit(&t)) return PW_BUSY;
  if (!t.ok) return known ? PW_ERROR : PW_MISMATCH;
  if (!known) return PW_MISMATCH;
  volatile unsigned char diff = 0;
  size_t n = strlen(hash);
  if (strlen(t.output) != n) return PW_MISMATCH;
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(t.output[i] ^ hash[i]);
  return diff == 0 ? PW_OK : PW_MISMATCH;
}

/* Unit tests for src/ext/password.c: bcrypt format, the pool's hash/verify round trip,
 * mismatches, the dummy check for unknown accounts, back-pressure, and stopping.
 *
 * The pool is process-wide and cannot be restarted after password_pool_stop(), so it is started
 * once (by the first test that needs it) and stopped by the last test. The start-up probe runs
 * in forked children, before this process starts any thread. */
#include "ext/password.h"
#include "unit.h"
#include <crypt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char bcrypt_alphabet[] = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void assert_bcrypt(const char *h, const char *prefix) {
  if (strncmp(h, prefix, strlen(prefix))) fail_msg("hash \"%s\" does not start with %s", h, prefix);
  assert_int_equal(strlen(h), 60); /* $2b$NN$ + 22 salt + 31 hash characters */
  assert_int_equal(strspn(h + 7, bcrypt_alphabet), 53);
}

static bool pool_started;

static void start_pool_once(void) {
  if (pool_started) return;
  password_pool_start(1, 0, 4);
  pool_started = true;
}

/* password_hash, retrying while the pool answers PW_BUSY (for at most 5 s): see
 * test_pool_serves_first_request for why a call right after the start may be refused. */
static pw_result hash_when_ready(const char *pw, char out[128]) {
  pw_result r = PW_BUSY;
  for (int i = 0; i < 5000 && (r = password_hash(pw, out)) == PW_BUSY; i++) sleep_us(1000);
  return r;
}

/* ---- synchronous hashing ---- */

static void test_hash_now_format(void **state) {
  (void)state;
  char a[128], b[128], c[128];
  memset(a, 0, sizeof a);
  assert_true(password_hash_now("correct horse battery staple", 4, a));
  assert_bcrypt(a, "$2b$04$");
  assert_true(password_hash_now("correct horse battery staple", 4, b));
  assert_bcrypt(b, "$2b$04$");
  assert_string_not_equal(a, b); /* a fresh salt every time */
  assert_true(password_hash_now("x", 5, c));
  assert_bcrypt(c, "$2b$05$");

  /* the hash is a real bcrypt of the password: libcrypt recomputes it from its own setting */
  struct crypt_data *cd = calloc(1, sizeof *cd);
  assert_non_null(cd);
  const char *again = crypt_rn("correct horse battery staple", a, cd, sizeof *cd);
  assert_non_null(again);
  assert_string_equal(again, a);
  again = crypt_rn("correct horse battery stapler", a, cd, sizeof *cd);
  assert_non_null(again);
  assert_string_not_equal(again, a);
  free(cd);
}

/* ---- the pool ---- */

/* With one worker and no queue, the first request after password_pool_start() should be served:
 * the one worker is idle. Each child process starts a fresh pool and hashes at once. */
static void test_pool_serves_first_request(void **state) {
  (void)state;
  enum { TRIALS = 40 };
  int busy = 0, ok = 0;
  for (int i = 0; i < TRIALS; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      password_pool_start(1, 0, 4);
      char out[128];
      _exit((int)password_hash("first", out));
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    int r = WEXITSTATUS(status);
    if (r == PW_BUSY)
      busy++;
    else if (r == PW_OK)
      ok++;
    else
      fail_msg("child %d: password_hash returned %d", i, r);
  }
  /* password_pool_start() returns only once its workers wait for work */
  assert_int_equal(busy, 0);
  assert_int_equal(ok, TRIALS);
}

static void test_pool_round_trip(void **state) {
  (void)state;
  start_pool_once();
  char h[128];
  memset(h, 0, sizeof h);
  assert_int_equal(hash_when_ready("s3cret-Pa55", h), PW_OK);
  assert_bcrypt(h, "$2b$04$"); /* the pool's cost */
  assert_int_equal(password_verify("s3cret-Pa55", h), PW_OK);
  /* again: the pool keeps serving */
  char h2[128];
  assert_int_equal(hash_when_ready("s3cret-Pa55", h2), PW_OK);
  assert_string_not_equal(h, h2);
  assert_int_equal(password_verify("s3cret-Pa55", h2), PW_OK);
  /* hashes made synchronously verify through the pool too */
  char h3[128];
  assert_true(password_hash_now("from the CLI", 4, h3));
  assert_int_equal(password_verify("from the CLI", h3), PW_OK);
}

static void test_wrong_password_mismatch(void **state) {
  (void)state;
  start_pool_once();
  char h[128];
  assert_int_equal(hash_when_ready("s3cret-Pa55", h), PW_OK);
  assert_int_equal(password_verify("s3cret-Pa56", h), PW_MISMATCH);
  assert_int_equal(password_verify("S3CRET-PA55", h), PW_MISMATCH);
  assert_int_equal(password_verify("s3cret-Pa55 ", h), PW_MISMATCH);
  assert_int_equal(password_verify("", h), PW_MISMATCH);
  assert_int_equal(password_verify("s3cret-Pa55", h), PW_OK);
}

static void test_unknown_account_mismatch(void **state) {
  (void)state;
  start_pool_once();
  assert_int_equal(password_verify("anything", NULL), PW_MISMATCH);
  /* the dummy password itself does not open an unknown account */
  assert_int_equal(password_verify("dummy-password-for-timing", NULL), PW_MISMATCH);
  assert_int_equal(password_verify("", NULL), PW_MISMATCH);
  /* a stored value that is not a bcrypt hash is treated like an unknown account */
  assert_int_equal(password_verify("plaintext", "plaintext"), PW_MISMATCH);
  assert_int_equal(password_verify("", ""), PW_MISMATCH);
}

static atomic_int slow_result = -1;
static const char *slow_hash;

static void *slow_verify(void *arg) {
  (void)arg;
  pw_result r;
  while ((r = password_verify("slow", slow_hash)) == PW_BUSY) sleep_us(200);
  atomic_store(&slow_result, (int)r);
  return NULL;
}

/* One worker, no queue: while the worker is busy another request is refused at once. */
static void test_busy_when_full(void **state) {
  (void)state;
  start_pool_once();
  static char h[128];
  assert_true(password_hash_now("slow", 12, h)); /* about 250 ms per check */
  slow_hash = h;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, slow_verify, NULL), 0);
  bool saw_busy = false;
  while (!saw_busy && atomic_load(&slow_result) < 0) {
    char out[128];
    pw_result r = password_hash("quick", out);
    if (r == PW_BUSY)
      saw_busy = true;
    else
      assert_int_equal(r, PW_OK);
    sleep_us(500);
  }
  pthread_join(t, NULL);
  assert_true(saw_busy);
  assert_int_equal(atomic_load(&slow_result), PW_OK);
  /* and the pool serves again afterwards */
  char out[128];
  assert_int_equal(hash_when_ready("again", out), PW_OK);
}

/* Last: stopping the pool; later calls are refused instead of waiting forever. */
static void test_stop(void **state) {
  (void)state;
  start_pool_once();
  password_pool_stop();
  char out[128];
  assert_int_equal(password_hash("late", out), PW_BUSY);
  assert_int_equal(password_verify("late", NULL), PW_BUSY);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_hash_now_format), cmocka_unit_test(test_pool_serves_first_request),
          cmocka_unit_test(test_pool_round_trip), cmocka_unit_test(test_wrong_password_mismatch),
          cmocka_unit_test(test_unknown_account_mismatch), cmocka_unit_test(test_busy_when_full),
          cmocka_unit_test(test_stop))

/* Recognition in helper processes (see ocr.h). Each thread that recognises keeps one helper,
 * spawned on first use (posix_spawn of this program with `ocr-helper`, so it inherits the
 * thread's lower CPU priority) and talks to it over two pipes. The answer is awaited with
 * poll() under the document's bound; past it, or when the helper dies, the helper is killed
 * and reaped, the document reads as unreadable, and the thread's next document starts a new
 * helper. A thread that exits closes its pipes: its helper sees the end of its input and
 * exits, and is reaped then. ocr_interrupt kills the helpers that are reading a document (the
 * list below holds them only while they are, and none is reaped meanwhile, so a pid killed is
 * never another process's). */
#include "core/log.h"
#include "core/util.h"
#include "ext/ocr.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PDF_PAGES 3 /* ocr_pdf reads at most this many pages */

extern char **environ;

typedef struct helper {
  pid_t pid;
  int to, from; /* its standard input and output */
} helper;

static const char *helper_exe;
static pthread_mutex_t busy_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t busy[64]; /* helpers reading a document now; 0: a free slot */
static bool interrupted;
static const char INTERRUPTED[] = "recognition interrupted: the service is stopping";
static int page_limit_ms; /* per image or page: OCR_PAGE_MS plus start-up, rendering, decoding */
static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void helper_end(helper *h, bool kill_it) {
  if (h->to >= 0) close(h->to);
  if (h->from >= 0) close(h->from);
  if (h->pid > 0) {
    if (kill_it) kill(h->pid, SIGKILL);
    while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR) {
    }
  }
  h->pid = 0, h->to = h->from = -1;
}

static void helper_free(void *p) {
  helper_end(p, false);
  free(p);
}

static void key_init(void) {
  if (pthread_key_create(&key, helper_free) != 0) abort();
}

void ocr_use_helper(const char *exe, int limit_ms) { helper_exe = exe, page_limit_ms = limit_ms; }

/* The calling thread's running helper, started when needed; NULL with err on failure. */
static helper *helper_get(char err[256]) {
  pthread_once(&once, key_init);
  helper *h = pthread_getspecific(key);
  if (!h) {
    h = malloc(sizeof *h);
    if (!h) return snprintf(err, 256, "out of memory"), NULL;
    *h = (helper){0, -1, -1};
    pthread_setspecific(key, h);
  }
  if (h->pid > 0) return h;
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  bool ok = pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, in[0], 0) == 0 &&
            posix_spawn_file_actions_adddup2(&fa, out[1], 1) == 0;
  char *argv[] = {(char *)helper_exe, "ocr-helper", NULL};
  int rc = ok ? posix_spawn(&h->pid, helper_exe, &fa, NULL, argv, environ) : errno;
  posix_spawn_file_actions_destroy(&fa);
  if (in[0] >= 0) close(in[0]);
  if (out[1] >= 0) close(out[1]);
  h->to = in[1], h->from = out[0];
  if (!ok || rc != 0) {
    char why[128];
    snprintf(err, 256, "cannot start the recognition helper: %s", errno_text(ok ? rc : errno, why, sizeof why));
    h->pid = 0;
    helper_end(h, false);
    return NULL;
  }
  return h;
}

/* Reads exactly n bytes before deadline; false on timeout or end of input. */
static bool read_until(int fd, char *buf, size_t n, int64_t deadline) {
  for (size_t got = 0; got < n;) {
    int64_t left = deadline - mono_ms();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = left > 0 ? poll(&p, 1, (int)left) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t k = read(fd, buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    got += (size_t)k;
  }
  return true;
}

void ocr_interrupt(void) {
  pthread_mutex_lock(&busy_mu);
  interrupted = true;
  for (size_t i = 0; i < ARRAY_LEN(busy); i++)
    if (busy[i] > 0) kill(busy[i], SIGKILL);
  pthread_mutex_unlock(&busy_mu);
}

bool ocr_interrupted(void) {
  pthread_mutex_lock(&busy_mu);
  bool was = interrupted;
  pthread_mutex_unlock(&busy_mu);
  return was;
}

/* Lists pid among the helpers reading a document: its slot (-1: none free, so it is not
 * interrupted), or -2 when ocr_interrupt came first. */
static int busy_add(pid_t pid) {
  pthread_mutex_lock(&busy_mu);
  int slot = interrupted ? -2 : -1;
  for (int i = 0; slot == -1 && i < (int)ARRAY_LEN(busy); i++)
    if (!busy[i]) busy[slot = i] = pid;
  pthread_mutex_unlock(&busy_mu);
  return slot;
}

static void busy_remove(int slot) {
  if (slot < 0) return;
  pthread_mutex_lock(&busy_mu);
  busy[slot] = 0;
  pthread_mutex_unlock(&busy_mu);
}

/* One document through the thread's helper, within bound_ms. */
static bool ask(char kind, const char *path, int bound_ms, ocr_text *out, char err[256]) {
  out->text = NULL, out->confidence = 0, err[0] = 0;
  helper *h = helper_get(err);
  if (!h) return false;
  int slot = busy_add(h->pid);
  if (slot == -2) return snprintf(err, 256, "%s", INTERRUPTED), false;
  int64_t deadline = mono_ms() + bound_ms;
  char req[4200], head[64];
  int n = snprintf(req, sizeof req, "%c %s\n", kind, path);
  size_t hn = 0;
  bool answered = n > 0 && (size_t)n < sizeof req && write(h->to, req, (size_t)n) == n;
  while (answered && (hn == 0 || head[hn - 1] != '\n')) /* the answer's first line */
    answered = hn < sizeof head - 1 && read_until(h->from, head + hn, 1, deadline) && ++hn;
  int ok = 0;
  double confidence = 0;
  size_t len = 0;
  if (answered) head[hn] = 0, answered = sscanf(head, "%d %lf %zu", &ok, &confidence, &len) == 3 && len < (64u << 20);
  char *payload = answered ? malloc(len + 1) : NULL;
  if (answered && (!payload || !read_until(h->from, payload, len, deadline))) answered = false;
  busy_remove(slot);
  if (!answered && ocr_interrupted()) { /* killed by ocr_interrupt: not the document's fault */
    helper_end(h, true);
    free(payload);
    return snprintf(err, 256, "%s", INTERRUPTED), false;
  }
  if (!answered) { /* overran its bound, or died: the document is unreadable */
    bool late = mono_ms() >= deadline;
    helper_end(h, true);
    free(payload);
    snprintf(err, 256, late ? "recognition stopped after %d ms" : "the recognition helper died", bound_ms);
    log_msg(LOG_WARN, "%s (%s)", err, path);
    out->text = strdup("");
    return out->text != NULL;
  }
  payload[len] = 0;
  if (ok) {
    out->text = payload, out->confidence = confidence;
    return true;
  }
  snprintf(err, 256, "%s", payload);
  free(payload);
  return false;
}

void ocr_text_free(ocr_text *t) {
  if (!t) return;
  free(t->text);
  t->text = NULL;
  t->confidence = 0;
}

bool ocr_image(const char *path, ocr_text *out, char err[256]) {
  return helper_exe ? ask('I', path, page_limit_ms, out, err) : ocr_image_here(path, out, err);
}

bool ocr_pdf(const char *path, ocr_text *out, char err[256]) {
  return helper_exe ? ask('P', path, PDF_PAGES * page_limit_ms, out, err) : ocr_pdf_here(path, out, err);
}

int ocr_helper_main(void) {
  /* answers go to a private copy of standard output; anything a library prints goes to the log */
  int fd = dup(1);
  FILE *answers = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!answers || dup2(2, 1) < 0) return 1;
  char line[4200];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    if (strlen(line) < 3 || line[1] != ' ') break;
    ocr_text t = {0};
    char err[256] = "";
    bool ok = line[0] == 'P' ? ocr_pdf_here(line + 2, &t, err) : ocr_image_here(line + 2, &t, err);
    const char *payload = ok ? t.text : err;
    fprintf(answers, "%d %.6f %zu\n", ok, ok ? t.confidence : 0.0, strlen(payload));
    fputs(payload, answers);
    fflush(answers);
    ocr_text_free(&t);
  }
  ocr_thread_release();
  fclose(answers);
  return 0;
}

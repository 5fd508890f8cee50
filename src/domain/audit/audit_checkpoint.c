/* Checkpoints of the audit chain kept outside the database.
 *
 * A checkpoint is the chain's tip (seq and hash) at a moment: the service logs it (`audit
 * checkpoint`, seq and hash: shipped logs hold a copy off the database host) and appends
 * `<seq>:<hash> <time>` to AUDIT_CHECKPOINT_FILE. Whoever can write the database can then
 * still delete records from the end and move the tip back, or rebuild the chain after an edit,
 * but no longer unseen: `marketplace audit verify` checks that the chain still holds every
 * checkpoint. So that only the newest records can go unseen, a checkpoint is written whenever
 * the tip moved AUDIT_CHECKPOINT_RECORDS records past the last one (an append's commit wakes
 * the thread) or AUDIT_CHECKPOINT_PERIOD_MS of the service clock passed with the tip moved
 * (one thread per process looks every second); one is written at start when the chain holds
 * records (those appended while this instance was down, by the command line or by another
 * instance) and the last at shutdown. Lines are appended with one write(2) on an O_APPEND
 * descriptor, so instances sharing the file never interleave. */
#include "domain/audit/audit_checkpoint.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/audit/audit_store.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOK_EVERY_MS 1000

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  _Atomic bool running;
  bool stopping, records_due; /* records_due: an append took the tip AUDIT_CHECKPOINT_RECORDS past last_seq */
  _Atomic int64_t last_seq;   /* the tip of the last checkpoint written (0: none yet) */
} cp = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Appends the tip to the checkpoint file and logs it, unless the chain is empty or the tip is
 * unchanged since the last checkpoint and force is false. Every checkpoint is logged, also
 * when the file cannot be written ("written": false, and an error line). */
static void checkpoint(bool force) {
  arena a;
  arena_init(&a);
  int64_t seq;
  const char *hash;
  if (audit_store_tip(&a, &seq, &hash) != DB_OK) {
    log_msg(LOG_ERROR, "audit checkpoint: the chain's tip could not be read");
    goto out;
  }
  if (seq == 0 || (!force && seq == atomic_load(&cp.last_seq))) goto out;
  char when[25], line[160];
  clock_format_iso(clock_now_ms(), when);
  int n = snprintf(line, sizeof line, "%" PRId64 ":%s %s\n", seq, hash, when);
  int fd = open(CFG.audit_checkpoint_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  bool written = fd >= 0 && write(fd, line, (size_t)n) == n && fsync(fd) == 0;
  if (fd >= 0) close(fd);
  if (!written)
    log_msg(LOG_ERROR, "audit checkpoint: %s could not be written: %s", CFG.audit_checkpoint_file, ERRNO_TEXT());
  log_json(LOG_INFO, "audit checkpoint",
           json_pack("{s:I,s:s,s:s,s:b}", "seq", (json_int_t)seq, "hash", hash, "file", CFG.audit_checkpoint_file,
                     "written", written));
  atomic_store(&cp.last_seq, seq);
out:
  arena_fini(&a);
}

static void *checkpoint_main(void *arg) {
  (void)arg;
  db_use_pool(DB_POOL_SLOW);
  int64_t due = clock_now_ms() + AUDIT_CHECKPOINT_PERIOD_MS;
  pthread_mutex_lock(&cp.mu);
  while (!cp.stopping) {
    if (!cp.records_due) clock_cond_wait_ms(&cp.cv, &cp.mu, LOOK_EVERY_MS);
    if (cp.stopping || (!cp.records_due && clock_now_ms() < due)) continue;
    cp.records_due = false;
    pthread_mutex_unlock(&cp.mu);
    checkpoint(false);
    due = clock_now_ms() + AUDIT_CHECKPOINT_PERIOD_MS;
    pthread_mutex_lock(&cp.mu);
  }
  pthread_mutex_unlock(&cp.mu);
  return NULL;
}

_Static_assert(sizeof(intptr_t) >= sizeof(int64_t), "a record's seq travels as the commit hook's pointer");

void audit_checkpoint_appended(void *seq) {
  if (!atomic_load(&cp.running) || (int64_t)(intptr_t)seq < atomic_load(&cp.last_seq) + AUDIT_CHECKPOINT_RECORDS)
    return;
  pthread_mutex_lock(&cp.mu);
  if (atomic_load(&cp.running) && !cp.stopping) {
    cp.records_due = true;
    pthread_cond_signal(&cp.cv);
  }
  pthread_mutex_unlock(&cp.mu);
}

void audit_checkpoints_start(void) {
  atomic_store(&cp.last_seq, 0);
  checkpoint(false);
  clock_cond_init(&cp.cv);
  cp.stopping = cp.records_due = false;
  atomic_store(&cp.running, pthread_create(&cp.thread, NULL, checkpoint_main, NULL) == 0);
}

void audit_checkpoints_stop(void) {
  if (!atomic_load(&cp.running)) return;
  thread_stop(cp.thread, &cp.mu, &cp.cv, &cp.stopping);
  atomic_store(&cp.running, false);
  pthread_cond_destroy(&cp.cv);
  checkpoint(true);
}

/* ---- reading them back ---- */

bool audit_checkpoint_parse(const char *text, audit_checkpoint *out) {
  char *end;
  if (!isdigit((unsigned char)text[0])) return false;
  errno = 0;
  long long seq = strtoll(text, &end, 10);
  if (errno || seq < 0 || *end != ':') return false;
  const char *h = end + 1;
  for (int i = 0; i < 64; i++)
    if (!isdigit((unsigned char)h[i]) && !(h[i] >= 'a' && h[i] <= 'f')) return false;
  if (h[64] && !isspace((unsigned char)h[64])) return false;
  out->seq = seq;
  memcpy(out->hash, h, 64);
  out->hash[64] = 0;
  return true;
}

int audit_checkpoints_read(arena *a, const char *path, audit_checkpoint **list, int *n, char err[256]) {
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(err, 256, "%s cannot be read: %s", path, ERRNO_TEXT());
    return -1;
  }
  int rc = 1, lineno = 0, cap = *n + 16;
  audit_checkpoint *out = arena_alloc(a, sizeof *out * (size_t)cap);
  memcpy(out, *list, sizeof *out * (size_t)*n);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    lineno++;
    if (line[0] == '\n' || line[0] == '#') continue;
    if (*n == cap) {
      audit_checkpoint *grown = arena_alloc(a, sizeof *out * (size_t)(cap *= 2));
      memcpy(grown, out, sizeof *out * (size_t)*n);
      out = grown;
    }
    if (!audit_checkpoint_parse(line, &out[*n])) {
      snprintf(err, 256, "%s line %d is not a checkpoint (SEQ:HASH)", path, lineno);
      rc = -1;
      break;
    }
    out[(*n)++].source = arena_printf(a, "%s line %d", path, lineno);
  }
  fclose(f);
  *list = out;
  return rc;
}

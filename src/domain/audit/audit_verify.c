/* `marketplace audit verify`: reads every row of the audit log and says whether the chain
 * holds.
 *
 * Every row is read: rows outside the chain's positions 1..tip (a seq of 0 or below, NULL
 * where a constraint was dropped to write one, or past the tip), and rows migration 0014 set
 * aside, are a broken chain; positions 1..tip are walked in order, each record checked
 * against its predecessor (prev_hash) and its own hash, and the end against the tip. A
 * record's hash is an HMAC under the chain's key (audit_key()); records written before the
 * chain was keyed carry a plain SHA-256, accepted only before the position where migration
 * 0023 recorded that the keyed chain starts (audit_tip.keyed_from) and before the first keyed
 * record: a plain hash at or after either means the record was rewritten without the key.
 * Then every checkpoint (AUDIT_CHECKPOINT_FILE, and those given with --expect) must still be
 * a record of the chain with the same hash, which catches what the database alone cannot
 * show: a tail cut off with the tip moved back, or a chain rebuilt after an edit (the start
 * of the keyed chain moved with it included). The first problem found, in the chain's order,
 * is reported. Last, in production, the checkpoints must exist: a missing or empty checkpoint
 * file while the chain has records older than the checkpoint period fails the check. */
#include "core/clock.h"
#include "core/config.h"
#include "domain/audit/audit.h"
#include "domain/audit/audit_chain.h"
#include "domain/audit/audit_checkpoint.h"
#include "domain/audit/audit_store.h"
#include "ext/digest.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 1000

typedef struct walk {
  FILE *out;
  audit_checkpoint *cps;         /* sorted by seq */
  int ncps, next_cp;             /* next_cp: the first checkpoint not checked yet */
  int nfile;                     /* how many of cps came from AUDIT_CHECKPOINT_FILE */
  int64_t keyed_from;            /* the first record with a keyed hash (0: none yet) */
  int64_t keyed_start;           /* where migration 0023 recorded that the keyed chain starts */
  int64_t oldest_seq, oldest_at; /* the record with the earliest created_at (0: none) */
} walk;

/* Reports the first break (1). */
static int broken(walk *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int broken(walk *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("audit chain broken at record ", w->out);
  vfprintf(w->out, fmt, ap);
  fputc('\n', w->out);
  va_end(ap);
  return 1;
}

/* The database could not be read (2). */
static int unreadable(walk *w) {
  fputs("audit verify: the database could not be read\n", w->out);
  return 2;
}

static int by_seq(const void *x, const void *y) {
  const audit_checkpoint *a = x, *b = y;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The checkpoints to hold, sorted: the file's, then those given on the command line. 0, or 2
 * after a message when one cannot be read. */
static int load_checkpoints(arena *a, walk *w, const char *const *expect, int nexpect, bool *file_found) {
  w->cps = arena_alloc(a, sizeof *w->cps * (size_t)(nexpect + 1));
  for (int i = 0; i < nexpect; i++) {
    if (!audit_checkpoint_parse(expect[i], &w->cps[i]) || strlen(expect[i]) != strcspn(expect[i], " \t")) {
      fprintf(w->out, "audit verify: --expect takes SEQ:HASH (a record number and its 64 hex digits), not %s\n",
              expect[i]);
      return 2;
    }
    w->cps[i].source = "--expect";
  }
  w->ncps = nexpect;
  char err[256];
  int rc = audit_checkpoints_read(a, CFG.audit_checkpoint_file, &w->cps, &w->ncps, err);
  if (rc < 0) return fprintf(w->out, "audit verify: %s\n", err), 2;
  *file_found = rc > 0;
  w->nfile = w->ncps - nexpect;
  qsort(w->cps, (size_t)w->ncps, sizeof *w->cps, by_seq);
  return 0;
}

/* What is wrong with r's stored hash, or NULL. */
static const char *hash_problem(walk *w, arena *a, const audit_record *r, const char *stored) {
  char keyed[65], plain[65];
  size_t keylen;
  const char *key = audit_key(&keylen);
  audit_record_hash(r, key, keylen, keyed);
  if (stored && digest_equal(stored, keyed)) {
    if (!w->keyed_from) w->keyed_from = r->seq;
    return NULL;
  }
  audit_record_hash_v1(r, plain);
  if (!stored || !digest_equal(stored, plain)) return "its content does not match its hash (altered)";
  if (w->keyed_from)
    return "its hash is a plain SHA-256 though the chain is keyed from an earlier record on (rewritten without the "
           "key)";
  if (r->seq >= w->keyed_start)
    return arena_printf(a,
                        "its hash is a plain SHA-256 though the chain is keyed from record %" PRId64
                        " on (migration 0023; rewritten without the key)",
                        w->keyed_start);
  return NULL; /* written before the chain was keyed */
}

/* The checkpoints at position seq, whose record's hash is now hash. */
static int check_checkpoints_at(walk *w, int64_t seq, const char *hash) {
  for (; w->next_cp < w->ncps && w->cps[w->next_cp].seq == seq; w->next_cp++) {
    const audit_checkpoint *c = &w->cps[w->next_cp];
    if (strcmp(c->hash, hash))
      return broken(w,
                    "%" PRId64 ": checkpoint %" PRId64 ":%s (%s) no longer matches: the record's hash is now %s (the "
                    "chain was rewritten)",
                    seq, c->seq, c->hash, c->source, hash);
  }
  return 0;
}

/* Walks positions 1..tip; 0 when every record follows its predecessor and holds its hash. */
static int walk_chain(walk *w, arena *a, int64_t tip, char prev[65], int64_t *last) {
  int64_t expected = 1;
  for (;;) {
    db_res *page;
    if (audit_store_page(a, expected - 1, tip, PAGE, &page) != DB_OK) return unreadable(w);
    for (int i = 0; i < page->rows; i++) {
      audit_record r = audit_store_record(page, i);
      const char *stored = db_field(page, i, "hash"), *problem;
      if (r.seq != expected) return broken(w, "%" PRId64 ": record %" PRId64 " is missing (deleted)", r.seq, expected);
      if (!r.prev_hash || strcmp(r.prev_hash, prev))
        return broken(w,
                      "%" PRId64 " (%s): it does not follow record %" PRId64
                      " (a record was altered, inserted or removed before it)",
                      r.seq, r.id, r.seq - 1);
      if ((problem = hash_problem(w, a, &r, stored))) return broken(w, "%" PRId64 " (%s): %s", r.seq, r.id, problem);
      if (!w->oldest_seq || r.created_at < w->oldest_at) w->oldest_seq = r.seq, w->oldest_at = r.created_at;
      if (check_checkpoints_at(w, r.seq, stored)) return 1;
      snprintf(prev, 65, "%s", stored);
      expected++;
    }
    if (page->rows < PAGE) break;
    arena_fini(a); /* prev is a copy: the page can go */
  }
  *last = expected - 1;
  return 0;
}

/* Rows outside 1..tip: those below 1 (before_walk) or above the tip. */
static int check_outside(walk *w, arena *a, int64_t tip, bool before_walk) {
  db_res *r;
  if (audit_store_outside(a, tip, &r) != DB_OK) return unreadable(w);
  for (int i = 0; i < r->rows; i++) {
    const char *seq = db_field(r, i, "seq");
    bool below = !seq || strtoll(seq, NULL, 10) < 1;
    if (below != before_walk) continue;
    if (below)
      return broken(w, "%s (%s): its seq is outside the chain's positions 1..%" PRId64 " (a record written outside it)",
                    seq ? seq : "NULL", db_field(r, i, "id"), tip);
    return broken(w,
                  "%s (%s): the chain's tip names record %" PRId64
                  " but the log holds record %s (records were added at the end, or the tip was moved back)",
                  seq, db_field(r, i, "id"), tip, seq);
  }
  return 0;
}

/* Where the keyed chain starts must be a position of the chain or the next one (migration 0023
 * recorded the tip's next position, and the tip only grows). */
static int check_keyed_start(walk *w, int64_t tip) {
  if (w->keyed_start < 1)
    return broken(w, "1: where the keyed chain starts (audit_tip.keyed_from, migration 0023) is no longer recorded");
  if (w->keyed_start > tip + 1)
    return broken(w,
                  "%" PRId64 ": the keyed chain is recorded to start there (audit_tip.keyed_from, migration 0023) but "
                  "the chain ends at record %" PRId64 " (the start was moved)",
                  w->keyed_start, tip);
  return 0;
}

/* In production the checkpoints must exist: 2, after a message on err, when the file gave
 * none while the chain has a record older than the checkpoint period. */
static int check_file_kept(walk *w, FILE *err, bool file_found) {
  if (CFG.env != ENV_PRODUCTION || w->nfile > 0 || !w->oldest_seq ||
      w->oldest_at > clock_now_ms() - AUDIT_CHECKPOINT_PERIOD_MS)
    return 0;
  char when[25];
  clock_format_iso(w->oldest_at, when);
  fprintf(err,
          "audit verify: checkpoint file missing: %s %s, yet record %" PRId64 " was written at %s, more than %lld "
          "seconds ago (the checkpoint period); in production the chain's checkpoints must be kept\n",
          CFG.audit_checkpoint_file, file_found ? "holds no checkpoint" : "does not exist", w->oldest_seq, when,
          AUDIT_CHECKPOINT_PERIOD_MS / 1000);
  return 2;
}

int audit_verify(FILE *out, FILE *err, const char *const *expect, int nexpect) {
  arena a, keep;
  arena_init(&a), arena_init(&keep);
  walk w = {.out = out};
  bool file_found = false;
  int64_t tip_seq, last = 0;
  const char *tip_hash;
  char prev[65] = AUDIT_GENESIS;
  db_res *aside;
  int result = load_checkpoints(&keep, &w, expect, nexpect, &file_found);
  if (result) goto out;
  if (audit_store_tip(&keep, &tip_seq, &tip_hash) != DB_OK || audit_store_keyed_from(&keep, &w.keyed_start) != DB_OK ||
      audit_store_set_aside(&a, &aside) != DB_OK) {
    result = unreadable(&w);
    goto out;
  }
  if (aside->rows) {
    result = broken(&w, "%s (%s): migration 0014 set it aside, its seq being outside the chain's positions",
                    db_field(aside, 0, "seq") ? db_field(aside, 0, "seq") : "NULL", db_field(aside, 0, "id"));
    goto out;
  }
  if ((result = check_outside(&w, &a, tip_seq, true))) goto out;
  if ((result = check_keyed_start(&w, tip_seq))) goto out;
  if ((result = check_checkpoints_at(&w, 0, AUDIT_GENESIS))) goto out;
  if ((result = walk_chain(&w, &a, tip_seq, prev, &last))) goto out;
  if (last != tip_seq || strcmp(tip_hash, prev)) {
    result = broken(&w,
                    "%" PRId64 ": the chain's tip names record %" PRId64 " but the log ends at record %" PRId64
                    " (records were added at or removed from the end)",
                    last + 1, tip_seq, last);
    goto out;
  }
  /* the service may have appended meanwhile: only rows past the tip as it is now are strays */
  if (audit_store_tip(&keep, &tip_seq, &tip_hash) != DB_OK) {
    result = unreadable(&w);
    goto out;
  }
  if ((result = check_outside(&w, &a, tip_seq, false))) goto out;
  if (w.next_cp < w.ncps) {
    const audit_checkpoint *c = &w.cps[w.next_cp];
    result = broken(&w,
                    "%" PRId64 ": checkpoint %" PRId64 ":%s (%s) no longer matches: the chain ends at record %" PRId64
                    " (records were removed from the end)",
                    c->seq, c->seq, c->hash, c->source, last);
    goto out;
  }
  if ((result = check_file_kept(&w, err, file_found))) goto out;
  fprintf(out, "audit chain intact: %" PRId64 " records, last hash %s\n", last, prev);
  if (last && w.keyed_from != 1)
    fprintf(out, "records before %" PRId64 " were hashed before the chain was keyed (plain SHA-256)\n",
            w.keyed_from ? w.keyed_from : last + 1);
  fprintf(out, "checkpoints: %d held (%s%s)\n", w.ncps, file_found ? "" : "no file at ", CFG.audit_checkpoint_file);
  result = 0;
out:
  arena_fini(&a), arena_fini(&keep);
  return result;
}

/* Checkpoints of the audit chain (its tip at a moment) kept outside the database, and their
 * reading back for `marketplace audit verify`. Internal to the audit domain. */
#ifndef DOMAIN_AUDIT_AUDIT_CHECKPOINT_H
#define DOMAIN_AUDIT_AUDIT_CHECKPOINT_H
#include "core/arena.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct audit_checkpoint {
  int64_t seq;
  char hash[65];
  const char *source; /* where it came from: "<file> line N" or "--expect" */
} audit_checkpoint;

/* A checkpoint is written once the tip moved this many records past the last one, or when
 * this much of the service clock passed and the tip moved; `audit verify` in production wants
 * a checkpoint file once the chain has records older than the period. */
#define AUDIT_CHECKPOINT_RECORDS 100
#define AUDIT_CHECKPOINT_PERIOD_MS (60LL * 1000)

/* Writes a checkpoint now when the chain holds records, then starts the thread that writes
 * one whenever the tip moved AUDIT_CHECKPOINT_RECORDS records or AUDIT_CHECKPOINT_PERIOD_MS
 * passed with the tip moved (serve only; after the database is open). */
void audit_checkpoints_start(void);
/* The commit hook of an append (db_on_commit; seq is the record's seq as an intptr_t): wakes
 * the thread when the record is AUDIT_CHECKPOINT_RECORDS past the last checkpoint. Any
 * thread; does nothing when the thread is not running (the command line). */
void audit_checkpoint_appended(void *seq);
/* Stops that thread and writes the shutdown checkpoint. No-op when it was not started. */
void audit_checkpoints_stop(void);

/* Parses "SEQ:HASH" (a record number and 64 lowercase hex digits; anything after a space is
 * ignored) into out (source untouched). False when text is not that. */
bool audit_checkpoint_parse(const char *text, audit_checkpoint *out);
/* Appends the checkpoints of the file at path to *list (*n entries, arena memory; blank lines
 * and lines starting with '#' are skipped). Returns 1 when read, 0 when there is no such file,
 * -1 with err set when it cannot be read or a line is not a checkpoint. */
int audit_checkpoints_read(arena *a, const char *path, audit_checkpoint **list, int *n, char err[256]);

#endif

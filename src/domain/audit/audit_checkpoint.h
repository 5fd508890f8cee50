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

/* Starts the thread that writes a checkpoint when the tip moved, at most every 5 minutes of
 * the service clock (serve only; after the database is open). */
void audit_checkpoints_start(void);
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

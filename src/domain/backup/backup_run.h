/* Taking a backup (backup_run.c), for the command and the scheduled task. */
#ifndef DOMAIN_BACKUP_RUN_H
#define DOMAIN_BACKUP_RUN_H
#include <stdbool.h>

/* Writes a backup to dest (a directory that must not exist or be empty, or s3://bucket/prefix)
 * and checks it; quiet: log lines only, never a progress line. False with err on failure
 * (nothing is left at a local dest). */
bool backup_take(const char *dest, bool quiet, char err[256]);

#endif

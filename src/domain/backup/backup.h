/* Backups and restores of everything the service keeps (docs/operations.md, "Backups"):
 * the database (SQLite: VACUUM INTO, a consistent copy while writers go on; PostgreSQL:
 * pg_dump's custom format over an exported snapshot), the stored files (local storage), the
 * audit trail's checkpoint file, a development server's generated JWT secret, and a manifest
 * (manifest.json: time, service version, schema version, engine, rows per table, the size and
 * SHA-256 of every file), written last. A backup lives in a directory or under an
 * s3://bucket/prefix (the service's own S3 client, S3_ENDPOINT's credentials).
 *
 * `marketplace backup DEST` and `marketplace restore SRC` are the operator's commands;
 * `serve` with BACKUP_INTERVAL takes one per period at BACKUP_DEST (a periodic task: one
 * instance at a time) and keeps the newest BACKUP_KEEP. A domain of its own above the audit
 * trail, whose verification a restore runs. */
#ifndef DOMAIN_BACKUP_H
#define DOMAIN_BACKUP_H
#include "domain/domain.h"

extern const domain_def backup_domain;

/* `marketplace backup DEST`: a backup into DEST (a directory that does not exist or is empty,
 * or s3://bucket/prefix with no backup there yet), checked once written. Progress on stderr
 * (a line redrawn on a terminal, else one log line per step). Returns the exit status: 0 when
 * everything was written and checked, 1 when something failed (the reason on stderr), 2 when
 * DEST is refused. Needs the configuration and the database open (not migrated by it). */
int backup_cli(const char *dest);

/* `marketplace restore SRC`: into an empty DATA_DIR (nothing but a generated jwt_secret) and,
 * on PostgreSQL, an empty database; refuses (exit 2, nothing written) a target that is not
 * empty, a manifest that is missing or names another engine, a schema newer than this
 * binary's, and any file whose size or SHA-256 is not the manifest's. Once restored: the
 * migrations newer than the backup, the manifest's counts beside the restored ones, and the
 * audit verification against the restored checkpoints; exit 0 when all hold, 1 otherwise.
 * Needs the configuration; opens and closes the database itself. */
int restore_cli(const char *src);

#endif

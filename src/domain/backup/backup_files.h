/* The backup domain's file work (backup_files.c): progress, hashing copies, directories,
 * child processes and the S3 side of a backup. Not thread-safe across one progress. */
#ifndef DOMAIN_BACKUP_FILES_H
#define DOMAIN_BACKUP_FILES_H
#include "ext/s3.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* What a backup or a restore has done of its total: redrawn on one line on a terminal, else
 * one log line per step. */
typedef struct bk_progress {
  const char *what; /* "backup" or "restore" */
  bool tty;
  int tables_done, tables_total;
  int64_t bytes_done, bytes_total;
  int64_t drawn_at; /* clock_mono_ms of the last redraw: at most ten a second */
} bk_progress;
void bk_progress_draw(bk_progress *p);
void bk_progress_step(bk_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void bk_progress_end(bk_progress *p);

/* SHA-256 (lowercase hex) and size of the file at path, counted into p (may be NULL). */
bool bk_hash_file(const char *path, bk_progress *p, char sha[65], int64_t *size);
/* Copies from to to (which must not exist), fsynced, with its SHA-256 and size. */
bool bk_copy_file(const char *from, const char *to, bk_progress *p, char sha[65], int64_t *size, char err[256]);
/* 0: path is missing or empty (ignore, when not NULL, is one name that does not count);
 * 1: it holds something; -1: it cannot be read. */
int bk_dir_state(const char *path, const char *ignore);
/* The names in a directory but those starting with a dot, sorted (heap; bk_free_list). */
char **bk_list_dir(const char *path, int *n);
void bk_free_list(char **names, int n);
/* Removes a file or a directory with everything in it. */
bool bk_remove_tree(const char *path);

/* Runs argv (argv[0] looked up in PATH) with stdout and stderr into the file output; returns
 * its exit status (-1 when it could not run), with the reason (the output's first line) in
 * err when it is not 0. */
int bk_run(const char *const argv[], const char *output, char err[256]);

/* s3://bucket/prefix into its parts (the prefix without slashes around it; "" for none). */
bool bk_s3_parse(const char *url, char bucket[256], char prefix[S3_KEY_MAX]);
/* The object prefix/name of bucket, from or to a local file (which get creates). */
bool bk_s3_put(const char *bucket, const char *prefix, const char *name, const char *path, char err[256]);
bool bk_s3_get(const char *bucket, const char *prefix, const char *name, const char *path, bool *not_found,
               char err[256]);
bool bk_s3_delete(const char *bucket, const char *prefix, const char *name, char err[256]);

#endif

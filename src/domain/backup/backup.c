/* The backup domain's declaration (domain/domain.h): the scheduled backup, a periodic task
 * every BACKUP_INTERVAL (off by default) taken by one instance at a time (the queue's lease),
 * which writes BACKUP_DEST/backup-<time> and keeps the newest BACKUP_KEEP; and its two
 * metrics. An S3 destination has no listing in the service's S3 client, so the backups taken
 * there are named in an index object, <prefix>/backups.json, kept with them. */
#include "domain/backup/backup.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/backup/backup_files.h"
#include "domain/backup/backup_run.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PREFIX "backup-"
#define INDEX "backups.json"

static _Atomic int64_t last_success_s; /* unix seconds of this instance's last success; 0: none */
static _Atomic long failures;

/* backup-20261127T224500Z from a slot (epoch ms). */
static void name_of(int64_t slot, char out[40]) {
  char iso[25];
  clock_format_iso(slot, iso); /* 2026-11-27T22:45:00.000Z */
  int j = 0;
  j += snprintf(out, 40, PREFIX);
  for (const char *c = iso; *c && *c != '.' && j < 38; c++)
    if (*c != '-' && *c != ':') out[j++] = *c;
  out[j++] = 'Z', out[j] = 0;
}

/* The oldest backups beyond BACKUP_KEEP in a directory go. */
static void keep_local(const char *dir) {
  int n;
  char **names = bk_list_dir(dir, &n);
  int ours = 0;
  for (int i = 0; i < n; i++) ours += str_starts_with(names[i], PREFIX);
  for (int i = 0; i < n && ours > CFG.backup_keep; i++) {
    if (!str_starts_with(names[i], PREFIX)) continue;
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (!bk_remove_tree(path)) log_msg(LOG_WARN, "backup: cannot remove the old backup %s", path);
    ours--;
  }
  bk_free_list(names, n);
}

/* Removes the backup at prefix/name: each file its manifest names, then the manifest. */
static void remove_s3_backup(const char *bucket, const char *prefix, const char *name) {
  char sub[S3_KEY_MAX], err[256], tmp[] = "/tmp/marketplace-keep-XXXXXX";
  snprintf(sub, sizeof sub, "%s%s%s", prefix, *prefix ? "/" : "", name);
  if (!mkdtemp(tmp)) return;
  char mpath[64];
  snprintf(mpath, sizeof mpath, "%s/m", tmp);
  json_t *m = NULL;
  if (bk_s3_get(bucket, sub, "manifest.json", mpath, NULL, err)) m = json_load_file(mpath, 0, NULL);
  bk_remove_tree(tmp);
  const char *file;
  json_t *f;
  json_object_foreach(json_object_get(m, "files"), file, f) bk_s3_delete(bucket, sub, file, err);
  if (!bk_s3_delete(bucket, sub, "manifest.json", err)) log_msg(LOG_WARN, "backup: cannot remove %s: %s", sub, err);
  json_decref(m);
}

/* Adds name to the index at s3://bucket/prefix and removes the backups beyond BACKUP_KEEP. */
static bool keep_s3(const char *bucket, const char *prefix, const char *name, char err[256]) {
  char tmp[] = "/tmp/marketplace-index-XXXXXX", path[64];
  if (!mkdtemp(tmp)) return snprintf(err, 256, "no temporary directory"), false;
  snprintf(path, sizeof path, "%s/i", tmp);
  bool missing = false;
  json_t *index = bk_s3_get(bucket, prefix, INDEX, path, &missing, err) ? json_load_file(path, 0, NULL) : NULL;
  bool ok = index || missing;
  if (!json_is_array(index)) json_decref(index), index = json_array();
  json_array_append_new(index, json_string(name));
  while (ok && json_array_size(index) > (size_t)CFG.backup_keep) {
    remove_s3_backup(bucket, prefix, json_string_value(json_array_get(index, 0)));
    json_array_remove(index, 0);
  }
  unlink(path);
  if (ok) ok = json_dump_file(index, path, 0) == 0 && bk_s3_put(bucket, prefix, INDEX, path, err);
  unlink(path);
  rmdir(tmp);
  json_decref(index);
  return ok;
}

/* One scheduled backup (a periodic task's unit): a failure is logged at error and counted, and
 * the next period tries again (a backup is not retried within its period). */
static bool scheduled(json_t *payload, char err[256]) {
  (void)err;
  json_int_t slot = json_integer_value(json_object_get(payload, "slot"));
  char name[40], why[256] = "", dest[4400];
  name_of(slot ? slot : clock_now_ms(), name);
  const char *base = CFG.backup_dest;
  bool s3 = str_starts_with(base, "s3://"), ok;
  char bucket[256], prefix[S3_KEY_MAX];
  snprintf(dest, sizeof dest, "%s%s%s", base, base[strlen(base) - 1] == '/' ? "" : "/", name);
  if (s3) {
    ok = bk_s3_parse(base, bucket, prefix) && backup_take(dest, true, why) && keep_s3(bucket, prefix, name, why);
    if (!*why && !ok) snprintf(why, sizeof why, "not an s3://bucket/prefix: %s", base);
  } else {
    ok = mkdir_p(base) && backup_take(dest, true, why);
    if (!*why && !ok) snprintf(why, sizeof why, "cannot create %s", base);
    if (ok) keep_local(base);
  }
  if (ok) {
    atomic_store(&last_success_s, clock_now_ms() / 1000);
    log_json(LOG_INFO, "backup taken", json_pack("{s:s}", "dest", dest));
  } else {
    atomic_fetch_add(&failures, 1);
    log_json(LOG_ERROR, "backup failed", json_pack("{s:s,s:s}", "dest", dest, "error", why));
  }
  return true;
}

static void metrics(struct buf *o) {
  buf_addf(o,
           "# HELP backup_last_success_timestamp_seconds When this instance last wrote and checked a scheduled "
           "backup (unix seconds; 0: never since start).\n# TYPE backup_last_success_timestamp_seconds gauge\n"
           "backup_last_success_timestamp_seconds %lld\n",
           (long long)atomic_load(&last_success_s));
  buf_addf(o,
           "# HELP backup_failures_total Scheduled backups that failed on this instance since start.\n"
           "# TYPE backup_failures_total counter\nbackup_failures_total %ld\n",
           atomic_load(&failures));
}

static const domain_job jobs[] = {{"backup", scheduled, .period_from = &CFG.backup_interval_ms}, {0}};
static const hs_hooks hooks = {.metrics = metrics};

const domain_def backup_domain = {.name = "backup", .jobs = jobs, .hooks = &hooks};

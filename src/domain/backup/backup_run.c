/* Taking a backup and restoring one (backup.h has the contract; docs/operations.md the
 * operator's side).
 *
 * Order matters for consistency. The audit checkpoint file is copied before the database, so
 * every checkpoint in the backup names a record the copied chain holds (a checkpoint taken
 * after the copy would name a record the restored chain lacks and fail its verification). The
 * stored files are copied after the database: a file is stored before the row that names it
 * is committed, so every file the copy names is there already (files added meanwhile are
 * kept too, unnamed, which costs only their bytes). The manifest is written last: a backup
 * without one is incomplete and is never restored. */
#include "domain/backup/backup_run.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "db/migrate.h"
#include "domain/audit/audit.h"
#include "domain/backup/backup.h"
#include "domain/backup/backup_files.h"
#include "domain/backup/backup_store.h"
#include "ext/digest.h"
#include "ext/s3.h"
#include "ext/storage.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MANIFEST "manifest.json"
#define CHECKPOINTS "audit-checkpoints"
#define SECRET "jwt_secret"
#define FILES_DIR "files"
#define FORMAT 1

static const char *engine_name(void) { return config_is_postgres() ? "postgres" : "sqlite"; }
static const char *db_file_name(void) { return config_is_postgres() ? "database.pgdump" : "database.sqlite"; }

/* The development secret generated into DATA_DIR (no JWT_SECRET set): the backup carries it,
 * since tokens, file links and, without AUDIT_KEY, the audit chain's key derive from it.
 * Secrets given in the environment are never written to a backup. */
static bool generated_secret(char path[4200]) {
  const char *env = getenv("JWT_SECRET");
  snprintf(path, 4200, "%s/" SECRET, CFG.data_dir);
  return !(env && *env) && access(path, R_OK) == 0;
}

static void add_file(json_t *files, const char *name, const char sha[65], int64_t size) {
  json_object_set_new(files, name, json_pack("{s:I,s:s}", "size", (json_int_t)size, "sha256", sha));
}

static void count_progress(void *ctx, int done, int total) {
  bk_progress *p = ctx;
  p->tables_done = done, p->tables_total = total;
  bk_progress_draw(p);
}

static char *path_in(const char *dir, const char *name) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", dir, name) < 0) die("out of memory");
  return p;
}

/* The database into dir/<db file>, consistent with view v (counts and schema version). */
static bool copy_database(const char *dir, backup_view *v, bk_progress *p, char err[256]) {
  char *to = path_in(dir, db_file_name());
  bool ok = backup_store_view_begin(v, to, count_progress, p, err);
  if (ok && config_is_postgres()) {
    /* pg_dump reads the view's exported snapshot: the dump and the counts are one instant */
    char server_major[8], bin[64], out[4300], version_err[256];
    snprintf(server_major, sizeof server_major, "%d", atoi(v->server_version) / 10000);
    snprintf(bin, sizeof bin, "/usr/lib/postgresql/%s/bin/pg_dump", server_major);
    const char *pg_dump = getenv("PG_DUMP");
    if (!pg_dump || !*pg_dump) pg_dump = access(bin, X_OK) == 0 ? bin : "pg_dump";
    snprintf(out, sizeof out, "%s.log", to);
    const char *version_argv[] = {pg_dump, "--version", NULL};
    if (bk_run(version_argv, out, version_err) != 0) {
      snprintf(err, 256, "%s", version_err);
      ok = false;
    } else {
      size_t len;
      char *text = read_file(out, &len);
      const char *digits = text ? strpbrk(text, "0123456789") : NULL;
      int dump_major = digits ? atoi(digits) : 0;
      free(text);
      if (dump_major < atoi(server_major)) {
        snprintf(err, 256,
                 "pg_dump %d cannot dump a PostgreSQL %s server: install postgresql-client-%s (or set PG_DUMP)",
                 dump_major, server_major, server_major);
        ok = false;
      }
    }
    if (ok) {
      char snapshot[160], file[4300];
      snprintf(snapshot, sizeof snapshot, "--snapshot=%s", v->snapshot);
      snprintf(file, sizeof file, "--file=%s", to);
      const char *argv[] = {pg_dump,    "--format=custom", "--no-owner", "--no-privileges", snapshot, file,
                            "--dbname", CFG.database_url,  NULL};
      ok = bk_run(argv, out, err) == 0;
    }
    unlink(out);
  }
  backup_store_view_end(v);
  free(to);
  return ok;
}

/* ---- S3 storage: the objects stay in the bucket, the manifest names them ---- */

static bool list_object(void *ctx, const char *key, long long size) {
  if (storage_key_valid(key)) /* the service's own objects, not a backup kept in the same bucket */
    json_object_set_new(ctx, key, json_pack("{s:I}", "size", (json_int_t)size));
  return true;
}

/* The SHA-256 of stored object key, read from the bucket; false with err. */
static bool object_sha(const char *key, bk_progress *p, char sha[65], int64_t *size, bool *missing, char err[256]) {
  char *data = NULL, type[128];
  size_t len = 0;
  bool not_found = false, ok = s3_get(key, &data, &len, type, &not_found, err);
  if (missing) *missing = not_found;
  if (ok) sha256_hex(data, len, sha), *size = (int64_t)len;
  if (ok && p) p->bytes_done += (int64_t)len, bk_progress_draw(p);
  free(data);
  return ok;
}

/* Every object of the storage bucket with its size and SHA-256 ({key: {size, sha256}}, new
 * reference), listed after the database was copied (as the local files are); NULL with err. */
static json_t *stored_objects(bk_progress *p, char err[256]) {
  json_t *objects = json_object();
  if (!s3_list("", list_object, objects, err)) return json_decref(objects), NULL;
  const char *key;
  json_t *o;
  json_object_foreach(objects, key, o) p->bytes_total += json_integer_value(json_object_get(o, "size"));
  void *tmp;
  json_object_foreach_safe(objects, tmp, key, o) {
    char sha[65];
    int64_t size;
    bool missing = false;
    if (!object_sha(key, p, sha, &size, &missing, err)) {
      if (missing) { /* deleted since the listing (an erasure): not named by the copy */
        json_object_del(objects, key);
        continue;
      }
      return json_decref(objects), NULL;
    }
    json_object_set_new(o, "size", json_integer(size));
    json_object_set_new(o, "sha256", json_string(sha));
  }
  return objects;
}

/* How many of the manifest's stored objects the bucket no longer holds as they were (each
 * reported on stderr, the first few); -1 when the bucket cannot be read. */
static int check_objects(json_t *manifest, bk_progress *p) {
  int bad = 0;
  const char *key;
  json_t *o;
  json_object_foreach(json_object_get(manifest, "objects"), key, o) {
    char sha[65], err[256];
    int64_t size;
    bool missing = false;
    if (!object_sha(key, p, sha, &size, &missing, err) && !missing) {
      fprintf(stderr, "restore: %s\n", err);
      return -1;
    }
    const char *want = json_string_value(json_object_get(o, "sha256"));
    if (missing || !want || strcmp(sha, want)) {
      if (++bad <= 5)
        fprintf(stderr, "restore: stored object %s is %s in the bucket\n", key, missing ? "missing" : "changed");
    }
  }
  return bad;
}

/* Everything into dir (exists, empty); the manifest (new reference) in *manifest. */
static bool take_into(const char *dir, bk_progress *p, json_t **manifest, char err[256]) {
  json_t *files = json_object();
  backup_view v = {0};
  char sha[65], uploads[4200], secret[4200];
  int64_t size;
  int nkeys = 0;
  char **keys = NULL;
  bool ok = false, local = !strcmp(storage_mode(), "local");
  snprintf(uploads, sizeof uploads, "%s/uploads", CFG.data_dir);
  if (local) keys = bk_list_dir(uploads, &nkeys);
  struct stat st;
  for (int i = 0; i < nkeys; i++) {
    char *f = path_in(uploads, keys[i]);
    if (stat(f, &st) == 0) p->bytes_total += st.st_size;
    free(f);
  }
  if (!config_is_postgres()) {
    const char *db = CFG.database_url + strlen("sqlite:");
    if (stat(db, &st) == 0) p->bytes_total += st.st_size;
  }
  if (stat(CFG.audit_checkpoint_file, &st) == 0) p->bytes_total += st.st_size;

  /* 1. the checkpoints, before the database (see the note at the top) */
  if (access(CFG.audit_checkpoint_file, F_OK) == 0) {
    char *to = path_in(dir, CHECKPOINTS);
    bool copied = bk_copy_file(CFG.audit_checkpoint_file, to, p, sha, &size, err);
    free(to);
    if (!copied) goto out;
    add_file(files, CHECKPOINTS, sha, size);
    bk_progress_step(p, "audit checkpoints copied (%lld bytes)", (long long)size);
  }
  if (generated_secret(secret)) {
    char *to = path_in(dir, SECRET);
    bool copied = bk_copy_file(secret, to, NULL, sha, &size, err);
    free(to);
    if (!copied) goto out;
    add_file(files, SECRET, sha, size);
  }
  /* 2. the database */
  if (!copy_database(dir, &v, p, err)) goto out;
  char *db = path_in(dir, db_file_name());
  bool hashed = bk_hash_file(db, NULL, sha, &size);
  free(db);
  if (!hashed) {
    snprintf(err, 256, "cannot read the database copy");
    goto out;
  }
  p->bytes_done += size;
  add_file(files, db_file_name(), sha, size);
  bk_progress_step(p, "database copied: %d tables, %lld bytes", p->tables_total, (long long)size);
  /* 3. the stored files */
  if (nkeys) {
    char *fdir = path_in(dir, FILES_DIR);
    bool made = mkdir(fdir, 0700) == 0;
    free(fdir);
    if (!made) {
      snprintf(err, 256, "cannot create %s/" FILES_DIR ": %s", dir, ERRNO_TEXT());
      goto out;
    }
  }
  for (int i = 0; i < nkeys; i++) {
    char name[300];
    snprintf(name, sizeof name, FILES_DIR "/%s", keys[i]);
    char *from = path_in(uploads, keys[i]), *to = path_in(dir, name);
    bool copied = bk_copy_file(from, to, p, sha, &size, err);
    bool gone = !copied && access(from, F_OK) != 0; /* deleted meanwhile (an erasure): not named by the copy */
    free(from), free(to);
    if (!copied && !gone) goto out;
    if (copied) add_file(files, name, sha, size);
  }
  if (local) bk_progress_step(p, "stored files copied: %d", nkeys);
  json_t *objects = NULL;
  if (!local && !(objects = stored_objects(p, err))) goto out;
  if (objects) bk_progress_step(p, "stored objects listed: %zu", json_object_size(objects));
  char created[25];
  clock_format_iso(clock_now_ms(), created);
  *manifest =
      json_pack("{s:i,s:s,s:s,s:s,s:I,s:s,s:s,s:O,s:O}", "format", FORMAT, "createdAt", created, "service",
                "marketplace", "serviceVersion", MARKETPLACE_VERSION, "schemaVersion", (json_int_t)v.schema_version,
                "engine", engine_name(), "storage", storage_mode(), "tables", v.counts, "files", files);
  if (*v.server_version) json_object_set_new(*manifest, "postgresServerVersion", json_string(v.server_version));
  if (objects) {
    json_object_set_new(*manifest, "objects", objects);
    json_object_set_new(*manifest, "storageNote",
                        json_string("the stored files are the objects of the S3 bucket (S3_BUCKET) listed in "
                                    "objects, not copies in this backup: keep the bucket versioned or replicated"));
  }
  char *mpath = path_in(dir, MANIFEST);
  ok = json_dump_file(*manifest, mpath, JSON_INDENT(2) | JSON_SORT_KEYS) == 0;
  free(mpath);
  if (!ok) snprintf(err, 256, "cannot write %s/" MANIFEST, dir), json_decref(*manifest), *manifest = NULL;
out:
  json_decref(v.counts);
  json_decref(files);
  bk_free_list(keys, nkeys);
  return ok;
}

/* Every file the manifest names is in dir with its size and SHA-256; the first that is not in
 * err. */
static bool check_files(const char *dir, json_t *manifest, bk_progress *p, char err[256]) {
  const char *name;
  json_t *f;
  json_object_foreach(json_object_get(manifest, "files"), name, f) {
    char *path = path_in(dir, name);
    char sha[65];
    int64_t size;
    bool read = bk_hash_file(path, p, sha, &size);
    free(path);
    if (!read) return snprintf(err, 256, "%s is missing from the backup", name), false;
    const char *want = json_string_value(json_object_get(f, "sha256"));
    if (!want || strcmp(want, sha) || size != json_integer_value(json_object_get(f, "size")))
      return snprintf(err, 256, "checksum mismatch on %s (the manifest says %.12s..., the file is %.12s...)", name,
                      want ? want : "?", sha),
             false;
  }
  return true;
}

static int64_t manifest_bytes(json_t *manifest) {
  int64_t total = 0;
  const char *name;
  json_t *f;
  json_object_foreach(json_object_get(manifest, "files"), name, f) total +=
      json_integer_value(json_object_get(f, "size"));
  return total;
}

/* Uploads dir's files under prefix, the manifest last, and reads each back to check it. */
static bool publish_s3(const char *dir, json_t *manifest, const char *bucket, const char *prefix, bk_progress *p,
                       char err[256]) {
  const char *name;
  json_t *f;
  json_object_foreach(json_object_get(manifest, "files"), name, f) {
    char *path = path_in(dir, name);
    bool put = bk_s3_put(bucket, prefix, name, path, err);
    free(path);
    if (!put) return false;
  }
  char *mpath = path_in(dir, MANIFEST);
  bool put = bk_s3_put(bucket, prefix, MANIFEST, mpath, err);
  free(mpath);
  if (!put) return false;
  bk_progress_step(p, "uploaded to s3://%s/%s", bucket, prefix);
  /* read back: what the bucket holds is what the manifest says */
  char check[4200];
  snprintf(check, sizeof check, "%s/.check", dir);
  if (mkdir(check, 0700) != 0) return snprintf(err, 256, "cannot create %s: %s", check, ERRNO_TEXT()), false;
  char *fdir = path_in(check, FILES_DIR);
  mkdir(fdir, 0700);
  free(fdir);
  bool ok = true;
  json_object_foreach(json_object_get(manifest, "files"), name, f) {
    char *path = path_in(check, name);
    ok = bk_s3_get(bucket, prefix, name, path, NULL, err);
    free(path);
    if (!ok) break;
  }
  p->bytes_done = 0;
  if (ok) ok = check_files(check, manifest, p, err);
  bk_remove_tree(check);
  return ok;
}

/* ---- backup ---- */

static char *temp_dir(const char *what) {
  const char *base = getenv("TMPDIR");
  char *t = NULL;
  if (asprintf(&t, "%s/marketplace-%s-XXXXXX", base && *base ? base : "/tmp", what) < 0) die("out of memory");
  if (!mkdtemp(t)) free(t), t = NULL;
  return t;
}

/* The directory a backup to dest is put together in: a hidden sibling, .<name>.partial-<pid>,
 * renamed to dest once complete (listings of backups skip it). */
static char *partial_of(const char *dest) {
  const char *slash = strrchr(dest, '/');
  int dir_len = slash ? (int)(slash - dest + 1) : 0;
  char *p = NULL;
  if (dir_len > 1) { /* its parent, made when missing */
    char *parent = xstrdup(dest);
    parent[dir_len - 1] = 0;
    bool made = mkdir_p(parent);
    free(parent);
    if (!made) return NULL;
  }
  if (asprintf(&p, "%.*s.%s.partial-%d", dir_len, dest, dest + dir_len, (int)getpid()) < 0) die("out of memory");
  return p;
}

bool backup_take(const char *dest, bool quiet, char err[256]) {
  bk_progress p = {.what = "backup", .tty = !quiet && isatty(2)};
  char bucket[256], prefix[S3_KEY_MAX];
  bool s3 = str_starts_with(dest, "s3://");
  if (s3 && !bk_s3_parse(dest, bucket, prefix)) return snprintf(err, 256, "not an s3://bucket/prefix: %s", dest), false;
  char *staging = NULL;
  if (s3) {
    staging = temp_dir("backup");
  } else if (!(staging = partial_of(dest)) || mkdir(staging, 0700) != 0) {
    snprintf(err, 256, "cannot create %s: %s", staging ? staging : dest, ERRNO_TEXT());
    free(staging);
    return false;
  }
  if (!staging) return snprintf(err, 256, "cannot create a temporary directory: %s", ERRNO_TEXT()), false;
  json_t *manifest = NULL;
  bool ok = take_into(staging, &p, &manifest, err);
  if (ok && s3) ok = publish_s3(staging, manifest, bucket, prefix, &p, err);
  if (ok && !s3) {
    p.bytes_done = 0, p.bytes_total = manifest_bytes(manifest);
    ok = check_files(staging, manifest, &p, err);
    /* onto DEST, which is missing or empty: rename(2) replaces an empty directory */
    if (ok && rename(staging, dest) != 0) ok = false, snprintf(err, 256, "cannot rename to %s: %s", dest, ERRNO_TEXT());
  }
  if (ok) bk_progress_step(&p, "written and checked: %s", dest);
  bk_progress_end(&p);
  if (!ok || s3) bk_remove_tree(staging);
  free(staging);
  json_decref(manifest);
  return ok;
}

int backup_cli(const char *given) {
  char err[256] = "", bucket[256], prefix[S3_KEY_MAX], dest[4096];
  snprintf(dest, sizeof dest, "%s", given);
  for (size_t n = strlen(dest); n > 1 && dest[n - 1] == '/';) dest[--n] = 0; /* DIR/ is DIR */
  if (str_starts_with(dest, "s3://")) {
    if (!bk_s3_parse(dest, bucket, prefix))
      return fprintf(stderr, "backup: refused: %s is not s3://bucket/prefix\n", dest), 2;
    char *t = temp_dir("probe");
    char *probe = t ? path_in(t, MANIFEST) : NULL;
    bool missing = false;
    bool exists = probe && bk_s3_get(bucket, prefix, MANIFEST, probe, &missing, err);
    if (t) bk_remove_tree(t);
    free(probe), free(t);
    if (exists) return fprintf(stderr, "backup: refused: %s already holds a backup (manifest.json)\n", dest), 2;
    if (!missing) return fprintf(stderr, "backup: %s cannot be reached: %s\n", dest, err), 1;
  } else if (bk_dir_state(dest, NULL) != 0) {
    return fprintf(stderr, "backup: refused: %s exists and is not an empty directory\n", dest), 2;
  }
  if (!backup_take(dest, false, err)) return fprintf(stderr, "backup failed: %s\n", err), 1;
  printf("backup written and checked: %s\n", dest);
  return 0;
}

/* ---- restore ---- */

static int refuse(const char *why) {
  fprintf(stderr, "restore: refused: %s\n", why);
  return 2;
}

/* The backup at src in a local directory: src itself, or the S3 prefix's files downloaded into
 * a temporary one (*temp, to remove). The manifest (new reference) or NULL with err. */
static json_t *fetch(const char *src, char **dir, char **temp, char err[256]) {
  *temp = NULL;
  char bucket[256], prefix[S3_KEY_MAX];
  if (!str_starts_with(src, "s3://")) {
    *dir = xstrdup(src);
  } else {
    if (!bk_s3_parse(src, bucket, prefix)) return snprintf(err, 256, "%s is not s3://bucket/prefix", src), NULL;
    if (!(*temp = temp_dir("restore"))) return snprintf(err, 256, "no temporary directory: %s", ERRNO_TEXT()), NULL;
    *dir = xstrdup(*temp);
    char *m = path_in(*dir, MANIFEST);
    bool got = bk_s3_get(bucket, prefix, MANIFEST, m, NULL, err);
    free(m);
    if (!got) return NULL;
  }
  char *m = path_in(*dir, MANIFEST);
  json_error_t je;
  json_t *manifest = json_load_file(m, 0, &je);
  free(m);
  if (!json_is_object(manifest) || !json_is_object(json_object_get(manifest, "files"))) {
    json_decref(manifest);
    snprintf(err, 256, "%s holds no readable manifest.json: not a complete backup", src);
    return NULL;
  }
  if (*temp) {
    char *fdir = path_in(*dir, FILES_DIR);
    mkdir(fdir, 0700);
    free(fdir);
    const char *name;
    json_t *f;
    json_object_foreach(json_object_get(manifest, "files"), name, f) {
      if (strstr(name, "..")) continue; /* never outside the directory; check_files then reports it missing */
      char *path = path_in(*dir, name);
      bool got = bk_s3_get(bucket, prefix, name, path, NULL, err);
      free(path);
      if (!got) return json_decref(manifest), NULL;
    }
  }
  return manifest;
}

/* Restores file name of dir to path (a file that must not exist yet). */
static bool put_back(const char *dir, const char *name, const char *path, bk_progress *p, char err[256]) {
  char *from = path_in(dir, name), sha[65];
  int64_t size;
  bool ok = bk_copy_file(from, path, p, sha, &size, err);
  free(from);
  return ok;
}

static bool restore_database(const char *dir, bk_progress *p, char err[256]) {
  if (!config_is_postgres()) return put_back(dir, db_file_name(), CFG.database_url + strlen("sqlite:"), p, err);
  char *dump = path_in(dir, db_file_name()), *log = path_in(dir, ".pg_restore.log");
  const char *pg_restore = getenv("PG_RESTORE");
  char file[4300];
  snprintf(file, sizeof file, "%s", dump);
  const char *argv[] = {pg_restore && *pg_restore ? pg_restore : "pg_restore",
                        "--no-owner",
                        "--no-privileges",
                        "--exit-on-error",
                        "--single-transaction",
                        "--dbname",
                        CFG.database_url,
                        file,
                        NULL};
  bool ok = bk_run(argv, log, err) == 0;
  unlink(log);
  struct stat st;
  if (ok && stat(dump, &st) == 0) p->bytes_done += st.st_size, bk_progress_draw(p);
  free(dump), free(log);
  return ok;
}

static bool restore_files(const char *dir, json_t *manifest, bk_progress *p, char err[256]) {
  char uploads[4200];
  snprintf(uploads, sizeof uploads, "%s/uploads", CFG.data_dir);
  const char *name;
  json_t *f;
  int n = 0;
  json_object_foreach(json_object_get(manifest, "files"), name, f) {
    if (!str_starts_with(name, FILES_DIR "/")) continue;
    const char *key = name + strlen(FILES_DIR "/");
    if (!storage_key_valid(key)) return snprintf(err, 256, "%s is not a stored file's name", name), false;
    if (!n++ && !mkdir_p(uploads)) return snprintf(err, 256, "cannot create %s: %s", uploads, ERRNO_TEXT()), false;
    char *to = path_in(uploads, key);
    bool ok = put_back(dir, name, to, p, err);
    free(to);
    if (!ok) return false;
  }
  bk_progress_step(p, "stored files restored: %d", n);
  if (json_object_get(json_object_get(manifest, "files"), CHECKPOINTS)) {
    unlink(CFG.audit_checkpoint_file); /* empty (checked before): replaced */
    if (!put_back(dir, CHECKPOINTS, CFG.audit_checkpoint_file, p, err)) return false;
    bk_progress_step(p, "audit checkpoints restored to %s", CFG.audit_checkpoint_file);
  }
  char secret[4200];
  if (json_object_get(json_object_get(manifest, "files"), SECRET) && generated_secret(secret)) {
    /* the generated development secret of the backed-up server replaces the one made now */
    unlink(secret);
    if (!put_back(dir, SECRET, secret, p, err)) return false;
    size_t len;
    char *s = read_file(secret, &len);
    if (s && len >= 32) free(CFG.jwt_secret), CFG.jwt_secret = s, CFG.jwt_secret_len = len;
  }
  return true;
}

/* Prints the manifest's counts beside the restored ones; true when every table matches. */
static bool compare_counts(json_t *manifest, json_t *restored) {
  json_t *expected = json_object_get(manifest, "tables");
  bool same = json_object_size(expected) == json_object_size(restored);
  printf("%-28s %12s %12s\n", "table", "backup", "restored");
  const char *name;
  json_t *n;
  json_object_foreach(expected, name, n) {
    json_t *got = json_object_get(restored, name);
    bool match = got && json_integer_value(got) == json_integer_value(n);
    same = same && match;
    char shown[24] = "missing";
    if (got) snprintf(shown, sizeof shown, "%lld", (long long)json_integer_value(got));
    printf("%-28s %12lld %12s%s\n", name, (long long)json_integer_value(n), shown, match ? "" : "  <- differs");
  }
  return same;
}

/* Why the target cannot take a restore (exit 2 after saying so), or 0 when it is empty: nothing
 * in DATA_DIR but the secret config_load generated, no checkpoint, no SQLite file, no table in
 * the PostgreSQL database; 1 when the database cannot be read. */
static int target_refused(void) {
  char why[4400], err[256] = "";
  struct stat st;
  if (bk_dir_state(CFG.data_dir, SECRET) != 0)
    return snprintf(why, sizeof why, "DATA_DIR %s is not empty: restore into a new, empty DATA_DIR", CFG.data_dir),
           refuse(why);
  if (stat(CFG.audit_checkpoint_file, &st) == 0 && st.st_size > 0)
    return snprintf(why, sizeof why, "AUDIT_CHECKPOINT_FILE %s is not empty", CFG.audit_checkpoint_file), refuse(why);
  if (!config_is_postgres() && access(CFG.database_url + strlen("sqlite:"), F_OK) == 0)
    return snprintf(why, sizeof why, "the database file %s exists", CFG.database_url + strlen("sqlite:")), refuse(why);
  if (!config_is_postgres()) return 0;
  if (!db_open(CFG.database_url, 2, 1, err)) return fprintf(stderr, "restore: %s\n", err), 1;
  int tables = backup_store_table_count();
  db_close();
  if (tables < 0) return fprintf(stderr, "restore: the database cannot be read\n"), 1;
  return tables > 0 ? refuse("the database is not empty: restore into a new, empty database") : 0;
}

/* Whether this binary may restore the backup (its engine, a schema it knows); says why not. */
static bool manifest_accepted(json_t *manifest) {
  const char *engine = json_string_value(json_object_get(manifest, "engine"));
  int64_t schema = json_integer_value(json_object_get(manifest, "schemaVersion"));
  int known = db_migrations_latest(engine_name());
  if (!engine || strcmp(engine, engine_name())) {
    fprintf(stderr, "restore: refused: the backup is of a %s database and DATABASE_URL is %s\n",
            engine ? engine : "unknown", engine_name());
    return false;
  }
  if (schema > known) {
    fprintf(stderr,
            "restore: refused: the backup's schema version %lld is newer than this binary's %d (the backup was taken "
            "by marketplace %s): restore it with that release or a newer one\n",
            (long long)schema, known, json_string_value(json_object_get(manifest, "serviceVersion")));
    return false;
  }
  return true;
}

/* The checks of what was restored: the counts beside the manifest's (before the migrations the
 * binary has beyond the backup's, which then run), the audit trail against the restored
 * checkpoints, the stored objects in the bucket. True when all hold. */
static bool restored_holds(json_t *manifest, bk_progress *p) {
  char err[256] = "";
  if (!db_open(CFG.database_url, 2, 1, err)) return fprintf(stderr, "restore: %s\n", err), false;
  json_t *counts = backup_store_counts(count_progress, p, err);
  bk_progress_end(p);
  if (!counts) return fprintf(stderr, "restore: %s\n", err), db_close(), false;
  bool same = compare_counts(manifest, counts);
  json_decref(counts);
  if (!same) fprintf(stderr, "restore: the restored row counts differ from the manifest's\n");
  bool migrated = db_migrate();
  if (!migrated) fprintf(stderr, "restore: the migrations newer than the backup failed\n");
  /* pg_restore leaves no statistics: a plan made before autovacuum's first pass would scan the
   * restored tables whole (SQLite's copied file keeps its own) */
  if (config_is_postgres()) {
    if (backup_store_analyze())
      bk_progress_step(p, "statistics gathered (ANALYZE)");
    else
      fprintf(stderr, "restore: ANALYZE failed: run it before the service starts\n");
  }
  int verified = audit_verify(stdout, stderr, NULL, 0);
  db_close();
  size_t nobjects = json_object_size(json_object_get(manifest, "objects"));
  int objects_bad = 0;
  if (nobjects) {
    p->bytes_done = 0, p->bytes_total = 0;
    objects_bad = check_objects(manifest, p);
    bk_progress_end(p);
    if (objects_bad > 0)
      fprintf(stderr,
              "restore: %d of the %zu stored objects the backup names are missing or changed in the bucket: "
              "restore them from the bucket's versions\n",
              objects_bad, nobjects);
    else if (!objects_bad)
      printf("stored objects: %zu in the bucket as the backup lists them\n", nobjects);
  }
  return same && migrated && verified == 0 && objects_bad == 0;
}

int restore_cli(const char *src) {
  int rc = target_refused();
  if (rc) return rc;
  char err[256] = "", *dir = NULL, *temp = NULL;
  json_t *manifest = fetch(src, &dir, &temp, err);
  bk_progress p = {.what = "restore", .tty = isatty(2)};
  rc = 2;
  if (!manifest) {
    fprintf(stderr, "restore: refused: %s\n", err);
    goto out;
  }
  if (!manifest_accepted(manifest)) goto out;
  p.bytes_total = manifest_bytes(manifest);
  if (!check_files(dir, manifest, &p, err)) { /* every file, before the first is written */
    bk_progress_end(&p);
    fprintf(stderr, "restore: refused: %s: the backup is damaged, nothing was restored\n", err);
    goto out;
  }
  bk_progress_step(&p, "every file matches the manifest");
  rc = 1;
  p.bytes_done = 0;
  if (!restore_database(dir, &p, err) || !restore_files(dir, manifest, &p, err)) {
    bk_progress_end(&p);
    fprintf(stderr, "restore failed: %s\n", err);
    goto out;
  }
  bk_progress_step(&p, "database restored");
  if (restored_holds(manifest, &p)) {
    rc = 0;
    printf("restored from %s (taken %s): counts match, audit trail verified\n", src,
           json_string_value(json_object_get(manifest, "createdAt")));
  }
out:
  if (temp) bk_remove_tree(temp);
  free(temp), free(dir);
  json_decref(manifest);
  return rc;
}

/* The files of a backup: copying with a running SHA-256, walking a backup's directory, removing
 * one, running pg_dump and pg_restore, and moving a backup to and from s3://bucket/prefix. A
 * backup is always put together in a local directory first; an S3 destination then receives
 * its files, the manifest last, and each is read back and hashed. */
#include "domain/backup/backup_files.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/s3.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- progress ---- */

static void human(int64_t n, char out[32]) {
  if (n < 1024)
    snprintf(out, 32, "%lld B", (long long)n);
  else if (n < 1024 * 1024)
    snprintf(out, 32, "%.1f KiB", (double)n / 1024);
  else if (n < 1024LL * 1024 * 1024)
    snprintf(out, 32, "%.1f MiB", (double)n / (1024 * 1024));
  else
    snprintf(out, 32, "%.2f GiB", (double)n / (1024.0 * 1024 * 1024));
}

void bk_progress_draw(bk_progress *p) {
  if (!p->tty) return;
  int64_t now = clock_mono_ms();
  bool complete = p->tables_done == p->tables_total && p->bytes_done >= p->bytes_total;
  if (now - p->drawn_at < 100 && !complete) return;
  p->drawn_at = now;
  char done[32], total[32];
  human(p->bytes_done, done);
  human(p->bytes_total, total);
  fprintf(stderr, "\r%s: tables %d/%d, %s of %s   ", p->what, p->tables_done, p->tables_total, done, total);
  fflush(stderr);
}

void bk_progress_step(bk_progress *p, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (p->tty) {
    bk_progress_draw(p);
    return;
  }
  log_json(LOG_INFO, p->what, json_pack("{s:s}", "step", text));
}

void bk_progress_end(bk_progress *p) {
  if (p->tty) p->drawn_at = 0, bk_progress_draw(p), fputc('\n', stderr);
}

/* ---- local files ---- */

static bool hash_fd(int fd, int out_fd, bk_progress *p, char sha[65], int64_t *size) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), NULL);
  static _Thread_local char chunk[1 << 16];
  bool ok = true;
  *size = 0;
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    if (n == 0) break;
    EVP_DigestUpdate(md, chunk, (size_t)n);
    for (ssize_t w = 0; out_fd >= 0 && w < n;) {
      ssize_t k = write(out_fd, chunk + w, (size_t)(n - w));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) {
        ok = false;
        break;
      }
      w += k;
    }
    if (!ok) break;
    *size += n;
    if (p) p->bytes_done += n, bk_progress_draw(p);
  }
  unsigned char raw[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(md, raw, &len);
  EVP_MD_CTX_free(md);
  hex_encode(raw, 32, sha);
  return ok;
}

bool bk_hash_file(const char *path, bk_progress *p, char sha[65], int64_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = hash_fd(fd, -1, p, sha, size);
  close(fd);
  return ok;
}

bool bk_copy_file(const char *from, const char *to, bk_progress *p, char sha[65], int64_t *size, char err[256]) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) return snprintf(err, 256, "cannot read %s: %s", from, ERRNO_TEXT()), false;
  int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0) {
    snprintf(err, 256, "cannot create %s: %s", to, ERRNO_TEXT());
    close(in);
    return false;
  }
  bool ok = hash_fd(in, out, p, sha, size);
  if (ok && fsync(out) != 0) ok = false;
  if (!ok) snprintf(err, 256, "cannot copy %s to %s: %s", from, to, ERRNO_TEXT());
  close(in);
  if (close(out) != 0 && ok) ok = false, snprintf(err, 256, "cannot write %s: %s", to, ERRNO_TEXT());
  return ok;
}

int bk_dir_state(const char *path, const char *ignore) {
  DIR *d = opendir(path);
  if (!d) return errno == ENOENT ? 0 : -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!ignore || strcmp(e->d_name, ignore))) n++;
  closedir(d);
  return n ? 1 : 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

char **bk_list_dir(const char *path, int *n) {
  *n = 0;
  DIR *d = opendir(path);
  if (!d) return NULL;
  size_t cap = 16;
  char **names = xcalloc(cap, sizeof *names);
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if ((size_t)*n + 1 >= cap) names = xrealloc(names, (cap *= 2) * sizeof *names);
    names[(*n)++] = xstrdup(e->d_name);
  }
  closedir(d);
  qsort(names, (size_t)*n, sizeof *names, by_name);
  return names;
}

void bk_free_list(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

bool bk_remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return unlink(path) == 0;
  int n;
  char **names = bk_list_dir(path, &n);
  bool ok = true;
  /* bk_list_dir skips dot files: remove those too */
  DIR *d = opendir(path);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] != '.' || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *sub = NULL;
    if (asprintf(&sub, "%s/%s", path, e->d_name) < 0) continue;
    ok = bk_remove_tree(sub) && ok;
    free(sub);
  }
  if (d) closedir(d);
  for (int i = 0; i < n; i++) {
    char *sub = NULL;
    if (asprintf(&sub, "%s/%s", path, names[i]) < 0) continue;
    ok = bk_remove_tree(sub) && ok;
    free(sub);
  }
  bk_free_list(names, n);
  return rmdir(path) == 0 && ok;
}

/* ---- child processes ---- */

int bk_run(const char *const argv[], const char *output, char err[256]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(err, 256, "cannot run %s: %s", argv[0], strerror(rc));
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return snprintf(err, 256, "waiting for %s: %s", argv[0], ERRNO_TEXT()), -1;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0) {
    size_t len = 0;
    char *text = read_file(output, &len);
    const char *first = text ? text : "";
    int cut = (int)strcspn(first, "\n");
    snprintf(err, 256, "%s failed (exit %d): %.*s", argv[0], code, cut > 200 ? 200 : cut, first);
    free(text);
  }
  return code;
}

/* ---- S3 ---- */

bool bk_s3_parse(const char *url, char bucket[256], char prefix[S3_KEY_MAX]) {
  if (!str_starts_with(url, "s3://")) return false;
  const char *b = url + 5;
  size_t blen = strcspn(b, "/");
  if (!blen || blen >= 256) return false;
  memcpy(bucket, b, blen);
  bucket[blen] = 0;
  const char *p = b + blen;
  while (*p == '/') p++;
  size_t plen = strlen(p);
  while (plen && p[plen - 1] == '/') plen--;
  if (plen >= S3_KEY_MAX - 200) return false;
  memcpy(prefix, p, plen);
  prefix[plen] = 0;
  return true;
}

static void s3_key(char out[S3_KEY_MAX], const char *prefix, const char *name) {
  snprintf(out, S3_KEY_MAX, "%s%s%s", prefix, *prefix ? "/" : "", name);
}

bool bk_s3_put(const char *bucket, const char *prefix, const char *name, const char *path, char err[256]) {
  char key[S3_KEY_MAX];
  s3_key(key, prefix, name);
  s3_use_bucket(bucket);
  bool ok = s3_put_file(key, path, "application/octet-stream", err);
  s3_use_bucket(NULL);
  return ok;
}

bool bk_s3_get(const char *bucket, const char *prefix, const char *name, const char *path, bool *not_found,
               char err[256]) {
  char key[S3_KEY_MAX], type[128];
  s3_key(key, prefix, name);
  char *data = NULL;
  size_t len = 0;
  bool missing = false;
  s3_use_bucket(bucket);
  bool ok = s3_get(key, &data, &len, type, &missing, err);
  s3_use_bucket(NULL);
  if (not_found) *not_found = missing;
  if (!ok) return false;
  FILE *f = fopen(path, "wbx");
  ok = f && fwrite(data, 1, len, f) == len;
  if (f && fclose(f) != 0) ok = false;
  if (!ok) snprintf(err, 256, "cannot write %s: %s", path, ERRNO_TEXT());
  free(data);
  return ok;
}

bool bk_s3_delete(const char *bucket, const char *prefix, const char *name, char err[256]) {
  char key[S3_KEY_MAX];
  s3_key(key, prefix, name);
  s3_use_bucket(bucket);
  bool ok = s3_delete(key, err);
  s3_use_bucket(NULL);
  return ok;
}

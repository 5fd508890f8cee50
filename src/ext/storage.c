/* The storage facade. Local files live in $DATA_DIR/uploads/<key>, written by rename from the
 * upload's temporary file (same filesystem: $DATA_DIR/tmp), so a reader never sees half a
 * file. With S3 configured the file is uploaded and the temporary copy removed. */
#include "ext/storage.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/tmpdir.h"
#include "core/util.h"
#include "db/db.h"
#include "ext/digest.h"
#include "ext/s3.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool use_s3(void) { return CFG.s3_endpoint && CFG.s3_bucket; }

static _Thread_local err_t failure;

err_t storage_failure(void) { return failure; }
void storage_failure_clear(void) { failure = ERR_OK; }

void storage_failure_note(int e) {
  failure = e == ENOSPC || e == EDQUOT ? ERR_INSUFFICIENT_STORAGE : ERR_UNAVAILABLE;
}

const char *storage_mode(void) { return use_s3() ? "s3" : "local"; }

static void local_path(const char *key, char *out, size_t cap) { snprintf(out, cap, "%s/uploads/%s", CFG.data_dir, key); }

bool storage_key_valid(const char *key) {
  /* 'c' + 24 base-36 characters, '.', a known extension */
  size_t n = strlen(key);
  if (n < ID_LEN + 4 || n >= STORAGE_KEY_LEN || key[0] != 'c' || key[ID_LEN] != '.') return false;
  for (int i = 1; i < ID_LEN; i++)
    if (!islower((unsigned char)key[i]) && !isdigit((unsigned char)key[i])) return false;
  const char *ext = key + ID_LEN + 1;
  return !strcmp(ext, "png") || !strcmp(ext, "jpg") || !strcmp(ext, "webp") || !strcmp(ext, "pdf");
}

bool storage_save(const char *tmp_path, const char *ext, const char *content_type, char key[STORAGE_KEY_LEN],
                  char err[256]) {
  char id[ID_LEN + 1];
  id_new(id);
  snprintf(key, STORAGE_KEY_LEN, "%s.%s", id, ext);
  if (!db_guard_passed()) { /* the request's token is refused: nothing is kept for it */
    snprintf(err, 256, "the request was refused");
    unlink(tmp_path);
    return false;
  }
  if (use_s3()) {
    bool ok = s3_put_file(key, tmp_path, content_type, err);
    unlink(tmp_path);
    if (!ok) failure = ERR_UNAVAILABLE;
    return ok;
  }
  char dir[4200], path[4300];
  snprintf(dir, sizeof dir, "%s/uploads", CFG.data_dir);
  local_path(key, path, sizeof path);
  if (!mkdir_p(dir) || rename(tmp_path, path) != 0) {
    int e = errno;
    snprintf(err, 256, "cannot store %s: %s", key, ERRNO_TEXT());
    unlink(tmp_path);
    storage_failure_note(e);
    return false;
  }
  chmod(path, 0600);
  return true;
}

bool storage_delete(const char *key) {
  if (!key || !storage_key_valid(key)) return true;
  if (use_s3()) {
    char err[256];
    return s3_delete(key, err);
  }
  char path[4300];
  local_path(key, path, sizeof path);
  return unlink(path) == 0 || errno == ENOENT;
}

bool storage_open(const char *key, int *fd, char **data, size_t *size, bool *not_found) {
  *fd = -1, *data = NULL, *size = 0, *not_found = false;
  if (!storage_key_valid(key)) return *not_found = true, false;
  if (use_s3()) {
    char err[256], ctype[128];
    return s3_get(key, data, size, ctype, not_found, err);
  }
  char path[4300];
  local_path(key, path, sizeof path);
  *fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (*fd < 0 || fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (*fd >= 0) close(*fd), *fd = -1;
    *not_found = true;
    return false;
  }
  *size = (size_t)st.st_size;
  return true;
}

char *storage_fetch_to_temp(const char *key) {
  int fd;
  char *data;
  size_t size;
  bool missing;
  if (!storage_open(key, &fd, &data, &size, &missing)) return NULL;
  const char *dir = tmpdir_path();
  char *path = xmalloc(strlen(dir) + 64);
  sprintf(path, "%s/fetch-XXXXXX%s", dir, strrchr(key, '.'));
  int out = mkstemps(path, (int)strlen(strrchr(key, '.')));
  bool ok = out >= 0;
  char buf[65536];
  if (ok && fd >= 0) {
    ssize_t r;
    while (ok && (r = read(fd, buf, sizeof buf)) > 0) ok = write(out, buf, (size_t)r) == r;
  } else if (ok) {
    ok = write(out, data, size) == (ssize_t)size;
  }
  if (out >= 0) close(out);
  if (fd >= 0) close(fd);
  free(data);
  if (!ok) {
    unlink(path);
    free(path);
    return NULL;
  }
  return path;
}

/* The URL-signing key: derived from JWT_SECRET so URLs and tokens never share a MAC key. */
static void url_mac(const char *key, long long expires, char out[65]) {
  char signing_key[65], msg[128];
  hmac_sha256_hex(CFG.jwt_secret, CFG.jwt_secret_len, "file-url-signing", 16, signing_key);
  int n = snprintf(msg, sizeof msg, "%s\n%lld", key, expires);
  hmac_sha256_hex(signing_key, 64, msg, (size_t)n, out);
}

int64_t storage_url_expiry(int64_t ttl_seconds) {
  int64_t window = ttl_seconds >= 24 * 3600 ? URL_WINDOW_LONG : URL_WINDOW_SHORT;
  /* in seconds rounded up, so a link never lasts less than its lifetime, not even by the
   * milliseconds of the current second */
  int64_t earliest = (clock_now_ms() + 999) / 1000 + ttl_seconds;
  return (earliest + window - 1) / window * window;
}

/* Writes the signed URL of key for ttl_seconds into out (cap bytes); returns its length, or
 * cap or more when it did not fit. */
static size_t sign(const char *key, int64_t ttl_seconds, char *out, size_t cap) {
  long long expires = storage_url_expiry(ttl_seconds);
  char sig[65];
  url_mac(key, expires, sig);
  int n = snprintf(out, cap, "%s/files/%s?expires=%lld&sig=%s", CFG.public_url, key, expires, sig);
  return n < 0 ? cap : (size_t)n;
}

char *storage_url(const char *key, int64_t ttl_seconds) {
  size_t cap = strlen(CFG.public_url) + strlen(key) + 128;
  char *url = xmalloc(cap);
  sign(key, ttl_seconds, url, cap);
  return url;
}

void storage_url_jw(jw *w, const char *key, int64_t ttl_seconds) {
  if (!key) return jw_null(w);
  char url[1024];
  size_t n = sign(key, ttl_seconds, url, sizeof url);
  if (n >= sizeof url) { /* a public URL longer than any sane one */
    char *heap = storage_url(key, ttl_seconds);
    jw_str(w, heap);
    free(heap);
    return;
  }
  jw_strn(w, url, n);
}

void storage_urls_jw(jw *w, const char *keys_json, int64_t ttl_seconds) {
  jw_arr(w);
  if (keys_json && strcmp(keys_json, "[]")) {
    json_t *keys = json_loads(keys_json, 0, NULL);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) if (json_is_string(k)) storage_url_jw(w, json_string_value(k), ttl_seconds);
    json_decref(keys);
  }
  jw_arr_end(w);
}

json_t *storage_url_json(const char *key, int64_t ttl_seconds) {
  if (!key) return json_null();
  char *url = storage_url(key, ttl_seconds);
  json_t *v = json_string(url);
  free(url);
  return v;
}

json_t *storage_urls_json(const char *keys_json, int64_t ttl_seconds) {
  json_t *keys = keys_json ? json_loads(keys_json, 0, NULL) : NULL, *out = json_array();
  size_t i;
  json_t *k;
  json_array_foreach(keys, i, k) if (json_is_string(k)) json_array_append_new(out, storage_url_json(json_string_value(k), ttl_seconds));
  json_decref(keys);
  return out;
}

bool storage_url_valid(const char *key, const char *expires, const char *sig) {
  if (!storage_key_valid(key) || !expires || !sig) return false;
  char *end;
  long long e = strtoll(expires, &end, 10);
  if (*end || end == expires || e < clock_now_ms() / 1000) return false;
  char expected[65];
  url_mac(key, e, expected);
  return digest_equal(sig, expected);
}

/* The storage facade. Local files live in $DATA_DIR/uploads/<key>, written by rename from the
 * upload's temporary file (same filesystem: $DATA_DIR/tmp), so a reader never sees half a
 * file. With S3 configured the file is uploaded and the temporary copy removed. */
#include "ext/storage.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/tmpdir.h"
#include "core/util.h"
#include "db/db.h"
#include "ext/digest.h"
#include "ext/s3.h"
#include "ext/thumbnail.h"
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

/* ---- variants: which a key has, from the key alone ---- */

static const int VARIANT_SIZES[STORAGE_VARIANTS_MAX] = {STORAGE_VARIANT_SMALL, STORAGE_VARIANT_LARGE};
static const char B36[] = "0123456789abcdefghijklmnopqrstuvwxyz";

/* 4 base-36 digits of a 64-bit FNV-1a over the id's first 20 characters and a salt: the
 * check that marks an id as one made with dimensions (a random id passes it by chance once in
 * 1.7 million, and then only with dimensions in range). Not a secret: links are signed. */
static void id_check(const char *id20, const char *salt, char out[4]) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < 20; i++) h = (h ^ (unsigned char)id20[i]) * 1099511628211ULL;
  for (; *salt; salt++) h = (h ^ (unsigned char)*salt) * 1099511628211ULL;
  h %= 36ULL * 36 * 36 * 36;
  for (int i = 3; i >= 0; i--) out[i] = B36[h % 36], h /= 36;
}

static void variant_salt(int size, char out[16]) { snprintf(out, 16, "v%d", size); }

static bool b36_4(const char *s, int *out) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    const char *d = strchr(B36, s[i]);
    if (!s[i] || !d) return false;
    v = v * 36 + (int)(d - B36);
  }
  *out = v;
  return true;
}

static void put_b36_4(char *s, int v) {
  for (int i = 3; i >= 0; i--) s[i] = B36[v % 36], v /= 36;
}

/* The original's pixel size, when key was stored with variants. */
static bool key_dims(const char *key, int *w, int *h) {
  if (!storage_key_valid(key)) return false;
  const char *id = key + 1; /* after the 'c' */
  char check[4];
  if (!b36_4(id + 12, w) || !b36_4(id + 16, h)) return false;
  if (*w < 1 || *h < 1 || *w > STORAGE_VARIANT_MAX_SIDE || *h > STORAGE_VARIANT_MAX_SIDE) return false;
  id_check(id, "o", check);
  return !memcmp(check, id + 20, 4) && (*w > VARIANT_SIZES[0] || *h > VARIANT_SIZES[0]);
}

/* size on the long side, the short side in proportion (rounded, at least 1) */
static void scaled(int w, int h, int size, int *vw, int *vh) {
  int lng = w > h ? w : h, sht = w > h ? h : w;
  int s = (int)(((long long)sht * size * 2 + lng) / (2LL * lng));
  if (s < 1) s = 1;
  *vw = w > h ? size : s, *vh = w > h ? s : size;
}

int storage_variants_of(const char *key, storage_variant out[STORAGE_VARIANTS_MAX]) {
  int w, h, n = 0;
  if (!key || !key_dims(key, &w, &h)) return 0;
  for (int i = 0; i < STORAGE_VARIANTS_MAX; i++) {
    int size = VARIANT_SIZES[i];
    if (size >= (w > h ? w : h)) continue; /* never larger than the original, nor its own size */
    storage_variant *v = &out[n++];
    scaled(w, h, size, &v->width, &v->height);
    char salt[16];
    variant_salt(size, salt);
    memcpy(v->key, key, 21); /* 'c' and the id's first 20 characters */
    id_check(key + 1, salt, v->key + 21);
    snprintf(v->key + ID_LEN, sizeof v->key - ID_LEN, ".webp");
  }
  return n;
}

void storage_new_key(const char *ext, int w, int h, char key[STORAGE_KEY_LEN]) {
  char id[ID_LEN + 1];
  storage_variant v[STORAGE_VARIANTS_MAX];
  for (;;) { /* again in the rare case (one in millions) that two keys would coincide */
    id_new(id);
    snprintf(key, STORAGE_KEY_LEN, "%s.%s", id, ext);
    if (w <= VARIANT_SIZES[0] && h <= VARIANT_SIZES[0]) {
      if (!storage_variants_of(key, v)) return; /* a random id that passes the check is not kept */
      continue;
    }
    put_b36_4(key + 13, w), put_b36_4(key + 17, h);
    id_check(key + 1, "o", key + 21);
    int n = storage_variants_of(key, v);
    bool distinct = n > 0;
    for (int i = 0; i < n; i++) distinct &= strcmp(v[i].key, key) != 0 && (i == 0 || strcmp(v[i].key, v[0].key));
    if (distinct) return;
  }
}

/* Moves the file at tmp_path (consumed) into storage under key. */
static bool put_file(const char *tmp_path, const char *key, const char *content_type, char err[256]) {
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

static bool delete_one(const char *key) {
  if (use_s3()) {
    char err[256];
    return s3_delete(key, err);
  }
  char path[4300];
  local_path(key, path, sizeof path);
  return unlink(path) == 0 || errno == ENOENT;
}

/* Makes and stores key's variants from the image at path: the largest from the original, each
 * smaller one from the larger one's WebP (it decodes much faster). False, with none of them
 * left stored, when one cannot be made (*store_failed false: libvips could not read the image)
 * or stored (*store_failed true). */
static bool save_variants(const char *path, const char *key, bool *store_failed) {
  storage_variant v[STORAGE_VARIANTS_MAX];
  int n = storage_variants_of(key, v), stored = 0;
  char made[STORAGE_VARIANTS_MAX][4300] = {{0}}, err[256];
  bool ok = true;
  *store_failed = false;
  for (int i = n - 1; ok && i >= 0; i--) {
    snprintf(made[i], sizeof made[i], "%s.v%d.webp", path, i);
    ok = thumbnail_webp(i == n - 1 ? path : made[i + 1], v[i].width, v[i].height, made[i], err);
    if (!ok) log_msg(LOG_WARN, "no variants for %s: %s", key, err);
  }
  for (int i = n - 1; ok && i >= 0; i--) {
    ok = put_file(made[i], v[i].key, "image/webp", err); /* consumes made[i] */
    if (ok)
      stored++;
    else
      log_msg(LOG_ERROR, "storing a variant failed: %s", err), *store_failed = true;
  }
  for (int i = 0; i < n; i++)
    if (made[i][0]) unlink(made[i]); /* what was not stored */
  for (int i = n - 1; !ok && i > n - 1 - stored; i--) delete_one(v[i].key);
  return ok;
}

bool storage_save(const char *tmp_path, const char *ext, const char *content_type, char key[STORAGE_KEY_LEN],
                  char err[256]) {
  int w = 0, h = 0;
  bool image = !strcmp(ext, "png") || !strcmp(ext, "jpg") || !strcmp(ext, "webp");
  if (image && (!thumbnail_size(tmp_path, &w, &h) || w > STORAGE_VARIANT_MAX_SIDE || h > STORAGE_VARIANT_MAX_SIDE ||
                (long long)w * h > THUMBNAIL_MAX_PIXELS))
    w = h = 0; /* kept as it came, without variants */
  storage_new_key(ext, w, h, key);
  if (!db_guard_passed()) { /* the request's token is refused: nothing is kept for it */
    snprintf(err, 256, "the request was refused");
    unlink(tmp_path);
    return false;
  }
  bool store_failed = false;
  storage_variant v[STORAGE_VARIANTS_MAX];
  if (storage_variants_of(key, v) && !save_variants(tmp_path, key, &store_failed)) {
    if (store_failed) {
      snprintf(err, 256, "cannot store the variants of %s", key);
      unlink(tmp_path);
      return false;
    }
    storage_new_key(ext, 0, 0, key); /* libvips could not read it: the original alone */
  }
  if (put_file(tmp_path, key, content_type, err)) return true;
  for (int i = 0, n = storage_variants_of(key, v); i < n; i++) delete_one(v[i].key);
  return false;
}

bool storage_delete(const char *key) {
  if (!key || !storage_key_valid(key)) return true;
  storage_variant v[STORAGE_VARIANTS_MAX];
  bool ok = true;
  for (int i = 0, n = storage_variants_of(key, v); i < n; i++) ok &= delete_one(v[i].key);
  return delete_one(key) && ok;
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

size_t storage_url_at(const char *key, int64_t expires, char *out, size_t cap) {
  char sig[65];
  url_mac(key, expires, sig);
  int n = snprintf(out, cap, "%s/files/%s?expires=%lld&sig=%s", CFG.public_url, key, (long long)expires, sig);
  return n < 0 ? cap : (size_t)n;
}

char *storage_url(const char *key, int64_t ttl_seconds) {
  int64_t expires = storage_url_expiry(ttl_seconds);
  size_t cap = strlen(CFG.public_url) + strlen(key) + 128;
  char *url = xmalloc(cap);
  storage_url_at(key, expires, url, cap);
  return url;
}

void storage_url_jw_at(jw *w, const char *key, int64_t expires) {
  if (!key) return jw_null(w);
  char url[1024];
  size_t n = storage_url_at(key, expires, url, sizeof url);
  if (n < sizeof url) return jw_strn(w, url, n);
  /* a public URL longer than any sane one */
  size_t cap = n + 1;
  char *heap = xmalloc(cap);
  storage_url_at(key, expires, heap, cap);
  jw_str(w, heap);
  free(heap);
}

void storage_url_jw(jw *w, const char *key, int64_t ttl_seconds) {
  storage_url_jw_at(w, key, storage_url_expiry(ttl_seconds));
}

/* Calls fn for each key of a cell: a key, or a JSON array text of keys ("[]" and NULL: none). */
static void each_key(const char *cell, void (*fn)(void *, const char *), void *arg) {
  if (!cell || !strcmp(cell, "[]")) return;
  if (cell[0] != '[') return fn(arg, cell);
  json_t *keys = json_loads(cell, 0, NULL);
  size_t i;
  json_t *k;
  json_array_foreach(keys, i, k) if (json_is_string(k)) fn(arg, json_string_value(k));
  json_decref(keys);
}

typedef struct jw_at {
  jw *w;
  int64_t expires;
} jw_at;

static void url_item(void *p, const char *key) { storage_url_jw_at(((jw_at *)p)->w, key, ((jw_at *)p)->expires); }

void storage_urls_jw_at(jw *w, const char *keys_json, int64_t expires) {
  jw_arr(w);
  jw_at at = {w, expires};
  each_key(keys_json, url_item, &at);
  jw_arr_end(w);
}

void storage_urls_jw(jw *w, const char *keys_json, int64_t ttl_seconds) {
  if (!keys_json || !strcmp(keys_json, "[]")) { /* nothing to sign */
    jw_arr(w);
    jw_arr_end(w);
    return;
  }
  storage_urls_jw_at(w, keys_json, storage_url_expiry(ttl_seconds));
}

void storage_variants_open(jw *w) {
  jw_key(w, "variants");
  jw_obj(w);
}

void storage_variants_close(jw *w) { jw_obj_end(w); }

static void variants_item(void *p, const char *key) {
  jw_at *at = p;
  storage_variant v[STORAGE_VARIANTS_MAX];
  int n = storage_variants_of(key, v);
  if (!n) return;
  char url[1024];
  if (storage_url_at(key, at->expires, url, sizeof url) >= sizeof url) return;
  jw_key(at->w, url);
  jw_arr(at->w);
  for (int i = 0; i < n; i++) {
    jw_obj(at->w);
    jw_key(at->w, "width");
    jw_int(at->w, v[i].width);
    jw_key(at->w, "height");
    jw_int(at->w, v[i].height);
    jw_key(at->w, "url");
    storage_url_jw_at(at->w, v[i].key, at->expires);
    jw_key_str(at->w, "contentType", "image/webp");
    jw_obj_end(at->w);
  }
  jw_arr_end(at->w);
}

static void has_item(void *p, const char *key) {
  storage_variant v[STORAGE_VARIANTS_MAX];
  if (storage_variants_of(key, v)) *(bool *)p = true;
}

bool storage_has_variants(const char *cell) {
  bool any = false;
  each_key(cell, has_item, &any);
  return any;
}

void storage_variants_add(jw *w, const char *cell, int64_t expires) {
  jw_at at = {w, expires};
  each_key(cell, variants_item, &at);
}

void storage_variants_jw(jw *w, const char *cell, int64_t expires) {
  if (!storage_has_variants(cell)) return;
  storage_variants_open(w);
  storage_variants_add(w, cell, expires);
  storage_variants_close(w);
}

/* key and expiry of a link of this service ({PUBLIC_URL}/files/<key>?expires=<unix>&sig=...) */
static bool parse_link(const char *url, char key[STORAGE_KEY_LEN], int64_t *expires) {
  size_t base = strlen(CFG.public_url);
  if (strncmp(url, CFG.public_url, base) || strncmp(url + base, "/files/", 7)) return false;
  const char *k = url + base + 7, *q = strstr(k, "?expires=");
  if (!q || (size_t)(q - k) >= STORAGE_KEY_LEN) return false;
  memcpy(key, k, (size_t)(q - k));
  key[q - k] = 0;
  char *end;
  *expires = strtoll(q + 9, &end, 10);
  return *end == '&' && storage_key_valid(key);
}

static void variants_json_add(json_t *out, const char *url) {
  char key[STORAGE_KEY_LEN], link[1024];
  int64_t expires;
  storage_variant v[STORAGE_VARIANTS_MAX];
  int n = parse_link(url, key, &expires) ? storage_variants_of(key, v) : 0;
  if (!n) return;
  json_t *list = json_array();
  for (int i = 0; i < n; i++) {
    if (storage_url_at(v[i].key, expires, link, sizeof link) >= sizeof link) continue;
    json_array_append_new(list, json_pack("{s:i,s:i,s:s,s:s}", "width", v[i].width, "height", v[i].height, "url", link,
                                          "contentType", "image/webp"));
  }
  json_object_set_new(out, url, list);
}

void storage_variants_json_set(json_t *obj) {
  json_t *out = json_object(), *v, *item;
  const char *name;
  size_t i;
  json_object_foreach(obj, name, v) {
    if (json_is_string(v)) variants_json_add(out, json_string_value(v));
    if (json_is_array(v))
      json_array_foreach(v, i, item) if (json_is_string(item)) variants_json_add(out, json_string_value(item));
  }
  if (json_object_size(out))
    json_object_set_new(obj, "variants", out);
  else
    json_decref(out);
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

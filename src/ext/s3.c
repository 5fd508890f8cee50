/* S3 client: path-style requests signed with AWS Signature Version 4, sent with libcurl.
 *
 * A request is described once (method, key, optional body) and sent by one function, which
 * makes the URL and the canonical URI from the same encoded path (so what is signed is what
 * goes on the wire), signs a fresh x-amz-date on every attempt, and retries network errors and
 * 5xx answers twice with a short backoff. A store that stops answering is given up on after
 * STALL_S seconds without a byte either way (not retried: it would only stall again), so an
 * upload to a hanging store fails in seconds rather than holding its worker for minutes. The Host header is set
 * explicitly to the endpoint's authority, the value that was signed, rather than left to curl. Signed headers: host,
 * x-amz-content-sha256, x-amz-date, plus content-type on PUT so the stored type cannot be
 * altered in transit.
 *
 * Uploads are streamed: the file is hashed in chunks (the payload hash must be the body's real
 * SHA-256), then rewound and handed to curl through a read callback, again on each retry.
 * The handle is set up by fetch_easy_setup (ext/fetch.h: http and https only, no signals, the
 * timeouts), which collects a download into a capped buffer (GET_MAX); an answer past the cap,
 * or past what memory allows, fails the call instead of aborting the process. Error answers
 * are S3's XML, from which <Code> and <Message> go into err. The signing date is the real wall clock (time(NULL)): a
 * signature dated by the test clock would be refused by a real store. */
#include "ext/s3.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/digest.h"
#include "ext/fetch.h"
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STALL_S 5
#include <time.h>
#include <unistd.h>

#define ATTEMPTS 3
#define GET_MAX ((size_t)1 << 30)
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- strings ---- */

/* The strings of a request (URL, canonical request, string to sign) are built from bounded
 * parts; one past TEXT_MAX means a broken configuration. */
#define TEXT_MAX (1024 * 1024)

static struct buf sb_new(void) {
  struct buf b;
  buf_init(&b, TEXT_MAX);
  return b;
}

static void sb_add(struct buf *b, const char *s, size_t n) {
  if (buf_addn(b, s, n) != BUF_OK) die("s3: a request string over %d bytes", TEXT_MAX);
}

static void sb_puts(struct buf *b, const char *s) { sb_add(b, s, strlen(s)); }

bool s3_uri_encode_key(const char *key, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
    bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
                 *p == '.' || *p == '_' || *p == '~' || *p == '/';
    if (n + (plain ? 1 : 3) + 1 > cap) {
      if (cap) out[0] = 0;
      return false;
    }
    if (plain)
      out[n++] = (char)*p;
    else
      out[n++] = '%', out[n++] = hex[*p >> 4], out[n++] = hex[*p & 15];
  }
  if (!cap) return false;
  out[n] = 0;
  return true;
}

/* Appends key encoded by s3_uri_encode_key. */
/* A query value, URI-encoded as SigV4 wants it ('/' encoded too). */
static void sb_add_query(struct buf *b, const char *v) {
  for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
    char one[4];
    if (isalnum(*p) || strchr("-._~", *p))
      one[0] = (char)*p, one[1] = 0;
    else
      snprintf(one, sizeof one, "%%%02X", *p);
    sb_puts(b, one);
  }
}

static void sb_add_encoded(struct buf *b, const char *key) {
  size_t cap = 3 * strlen(key) + 1;
  char *e = xmalloc(cap);
  s3_uri_encode_key(key, e, cap);
  sb_puts(b, e);
  free(e);
}

/* ---- signing ---- */

static int header_cmp(const void *a, const void *b) {
  return strcmp(((const s3_header *)a)->name, ((const s3_header *)b)->name);
}

/* Appends a header value trimmed, with each inner run of spaces and tabs made one space. */
static void sb_add_value(struct buf *b, const char *v) {
  while (*v == ' ' || *v == '\t') v++;
  bool gap = false;
  for (; *v; v++) {
    if (*v == ' ' || *v == '\t') {
      gap = true;
      continue;
    }
    if (gap) sb_add(b, " ", 1), gap = false;
    sb_add(b, v, 1);
  }
}

/* out may be the key's own storage. */
static void hmac_raw(const void *key, size_t keylen, const char *msg, unsigned char out[32]) {
  unsigned char md[32];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, strlen(msg), md, &n);
  memcpy(out, md, sizeof md);
  OPENSSL_cleanse(md, sizeof md);
}

void s3_sigv4_sign(const char *method, const char *canonical_uri, const char *canonical_query, const s3_header *headers,
                   size_t n, const char *amz_date, const char *payload_sha256_hex, const char *region,
                   const char *access_key, const char *secret_key, char out[512]) {
  struct buf req = sb_new(), names = sb_new(), sts = sb_new(), secret = sb_new();
  s3_header *h = xmalloc((n ? n : 1) * sizeof *h);
  memcpy(h, headers, n * sizeof *h);
  qsort(h, n, sizeof *h, header_cmp);

  sb_puts(&req, method), sb_puts(&req, "\n");
  sb_puts(&req, canonical_uri), sb_puts(&req, "\n");
  sb_puts(&req, canonical_query), sb_puts(&req, "\n");
  for (size_t i = 0; i < n; i++) {
    sb_puts(&req, h[i].name), sb_puts(&req, ":");
    sb_add_value(&req, h[i].value), sb_puts(&req, "\n");
    if (i) sb_puts(&names, ";");
    sb_puts(&names, h[i].name);
  }
  sb_puts(&names, ""); /* non-NULL even with no headers */
  sb_puts(&req, "\n"), sb_puts(&req, buf_ptr(&names)), sb_puts(&req, "\n");
  sb_puts(&req, payload_sha256_hex);

  char day[9], scope[200], req_hash[65], signature[65];
  snprintf(day, sizeof day, "%.8s", amz_date);
  snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", day, region);
  sha256_hex(buf_ptr(&req), buf_len(&req), req_hash);
  sb_puts(&sts, "AWS4-HMAC-SHA256\n"), sb_puts(&sts, amz_date), sb_puts(&sts, "\n");
  sb_puts(&sts, scope), sb_puts(&sts, "\n"), sb_puts(&sts, req_hash);

  unsigned char k[32];
  sb_puts(&secret, "AWS4"), sb_puts(&secret, secret_key);
  hmac_raw(buf_ptr(&secret), buf_len(&secret), day, k);
  hmac_raw(k, sizeof k, region, k);
  hmac_raw(k, sizeof k, "s3", k);
  hmac_raw(k, sizeof k, "aws4_request", k);
  hmac_sha256_hex(k, sizeof k, buf_ptr(&sts), buf_len(&sts), signature);
  snprintf(out, 512, "AWS4-HMAC-SHA256 Credential=%s/%s,SignedHeaders=%s,Signature=%s", access_key, scope,
           buf_ptr(&names), signature);

  OPENSSL_cleanse(k, sizeof k);
  OPENSSL_cleanse(buf_ptr(&secret), buf_len(&secret));
  free(h), buf_free(&req), buf_free(&names), buf_free(&sts), buf_free(&secret);
}

void s3_sigv4_authorization(const char *method, const char *canonical_uri, const char *canonical_query,
                            const char *host, const char *amz_date, const char *payload_sha256_hex, const char *region,
                            const char *access_key, const char *secret_key, char out[512]) {
  s3_header h[] = {
      {"host", host},
      {"x-amz-content-sha256", payload_sha256_hex},
      {"x-amz-date", amz_date},
  };
  s3_sigv4_sign(method, canonical_uri, canonical_query, h, ARRAY_LEN(h), amz_date, payload_sha256_hex, region,
                access_key, secret_key, out);
}

/* ---- requests ---- */

/* One call: what to send, and what came back from the last attempt. */
typedef struct s3_req {
  const char *method; /* "PUT", "GET" or "DELETE" */
  const char *key;
  FILE *body; /* PUT only: the file, sent from its start on every attempt */
  curl_off_t body_len;
  const char *payload_hash;
  const char *content_type; /* PUT only */
  const char *query;        /* the canonical query string ("" or NULL: none), the bucket's listing */
  long status;
  struct buf resp; /* the answer's body, capped at GET_MAX (buf_result: why it was cut) */
  char resp_type[128];
  curl_off_t moved; /* bytes sent and received so far in this attempt */
  int64_t moved_at; /* when that last changed (clock_mono_ms) */
  bool stalled;
} s3_req;

/* Aborts a transfer that moved no byte either way for STALL_S seconds. */
static int watch_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  (void)dltotal, (void)ultotal;
  s3_req *r = arg;
  int64_t now = clock_mono_ms();
  if (dlnow + ulnow != r->moved || !r->moved_at) r->moved = dlnow + ulnow, r->moved_at = now;
  return (r->stalled = now - r->moved_at > STALL_S * 1000) ? 1 : 0;
}

static _Thread_local const char *bucket_override; /* s3_use_bucket */

void s3_use_bucket(const char *bucket) { bucket_override = bucket; }

static const char *bucket(void) { return bucket_override ? bucket_override : CFG.s3_bucket; }

static bool config_ok(char err[256]) {
  const char *missing = !CFG.s3_endpoint || !*CFG.s3_endpoint                     ? "S3_ENDPOINT"
                        : !bucket() || !*bucket()                                 ? "S3_BUCKET"
                        : !CFG.s3_region || !*CFG.s3_region                       ? "S3_REGION"
                        : !CFG.s3_access_key_id || !*CFG.s3_access_key_id         ? "S3_ACCESS_KEY_ID"
                        : !CFG.s3_secret_access_key || !*CFG.s3_secret_access_key ? "S3_SECRET_ACCESS_KEY"
                                                                                  : NULL;
  if (missing) snprintf(err, 256, "s3: %s is not set", missing);
  return !missing;
}

/* The URL, canonical URI and Host value for key, from S3_ENDPOINT ("scheme://authority[/prefix]"). */
static bool target(const char *key, bool listing, struct buf *url, struct buf *uri, char host[256], char err[256]) {
  size_t klen = strlen(key);
  if ((!klen && !listing) || klen > S3_KEY_MAX)
    return snprintf(err, 256, "s3: key must be 1 to %d bytes", S3_KEY_MAX), false;
  const char *ep = CFG.s3_endpoint;
  size_t slen = str_starts_with(ep, "http://") ? 7 : str_starts_with(ep, "https://") ? 8 : 0;
  if (!slen) return snprintf(err, 256, "s3: S3_ENDPOINT must start with http:// or https://"), false;
  const char *auth = ep + slen;
  size_t alen = strcspn(auth, "/?#");
  if (!alen || alen >= 256) return snprintf(err, 256, "s3: S3_ENDPOINT has no valid host"), false;
  memcpy(host, auth, alen);
  host[alen] = 0;
  const char *prefix = auth + alen;
  size_t plen = strcspn(prefix, "?#");
  while (plen && prefix[plen - 1] == '/') plen--;
  sb_add(uri, prefix, plen);
  sb_puts(uri, "/");
  sb_add_encoded(uri, bucket());
  if (!listing) {
    sb_puts(uri, "/");
    sb_add_encoded(uri, key);
  }
  sb_add(url, ep, slen + alen);
  sb_puts(url, buf_ptr(uri));
  return true;
}

static size_t read_body(char *buf, size_t size, size_t nitems, void *arg) {
  FILE *f = arg;
  size_t n = fread(buf, 1, size * nitems, f);
  return n == 0 && ferror(f) ? CURL_READFUNC_ABORT : n;
}

static int seek_body(void *arg, curl_off_t offset, int origin) {
  return fseeko(arg, (off_t)offset, origin) == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
}

/* One attempt of r: signs it now, sends it, and leaves status, body and Content-Type in r. */
static CURLcode send_once(s3_req *r, const char *url, const char *uri, const char *host) {
  char amz_date[17], auth[512], line[700];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  s3_header signed_h[] = {
      {"host", host},
      {"x-amz-content-sha256", r->payload_hash},
      {"x-amz-date", amz_date},
      {"content-type", r->content_type},
  };
  s3_sigv4_sign(r->method, uri, r->query ? r->query : "", signed_h, r->content_type ? 4 : 3, amz_date, r->payload_hash,
                CFG.s3_region, CFG.s3_access_key_id, CFG.s3_secret_access_key, auth);

  CURLcode cc = CURLE_OUT_OF_MEMORY;
  struct curl_slist *h = NULL;
  CURL *curl = curl_easy_init();
  if (!curl) goto out;
  snprintf(line, sizeof line, "Host: %s", host), h = curl_slist_append(h, line);
  snprintf(line, sizeof line, "x-amz-date: %s", amz_date), h = curl_slist_append(h, line);
  snprintf(line, sizeof line, "x-amz-content-sha256: %s", r->payload_hash), h = curl_slist_append(h, line);
  snprintf(line, sizeof line, "Authorization: %s", auth), h = curl_slist_append(h, line);
  if (r->content_type) snprintf(line, sizeof line, "Content-Type: %s", r->content_type), h = curl_slist_append(h, line);
  if (!h) goto out;

  fetch_easy_setup(curl, url, 60000L, 5000L, &r->resp);
  curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L); /* a key segment ".." is a name, not a step up */
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
  r->moved = 0, r->moved_at = 0, r->stalled = false;
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, watch_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, r);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  if (r->body) {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
    curl_easy_setopt(curl, CURLOPT_READDATA, r->body);
    curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, seek_body);
    curl_easy_setopt(curl, CURLOPT_SEEKDATA, r->body);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, r->body_len);
  } else if (strcmp(r->method, "GET")) {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r->method);
  }
  cc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
  char *type = NULL;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
  snprintf(r->resp_type, sizeof r->resp_type, "%s", type ? type : "");
out:
  curl_slist_free_all(h);
  if (curl) curl_easy_cleanup(curl);
  return cc;
}

/* The length of s cut to at most max bytes without splitting a UTF-8 sequence, for "%.*s". */
static int utf8_cut(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  if (n == max)
    while (n && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  return (int)n;
}

/* Copies the text of <tag>...</tag> from an S3 XML error body, or "" when absent. */
static void xml_text(const char *xml, const char *tag, char *out, size_t cap) {
  char open[40], close[40];
  snprintf(open, sizeof open, "<%s>", tag), snprintf(close, sizeof close, "</%s>", tag);
  const char *a = xml ? strstr(xml, open) : NULL, *b = a ? strstr(a, close) : NULL;
  out[0] = 0;
  if (b) snprintf(out, cap, "%.*s", (int)(b - a - strlen(open)), a + strlen(open));
}

/* Whether a transfer error may go away on another attempt (not our own refusals). */
static bool transient(CURLcode cc) {
  return cc != CURLE_OK && cc != CURLE_WRITE_ERROR && cc != CURLE_READ_ERROR && cc != CURLE_ABORTED_BY_CALLBACK &&
         cc != CURLE_URL_MALFORMAT && cc != CURLE_UNSUPPORTED_PROTOCOL && cc != CURLE_OUT_OF_MEMORY &&
         cc != CURLE_OPERATION_TIMEDOUT;
}

/* Sends r with retries. True when the last attempt got an answer (any status, in r->status);
 * false with err on a transport failure. */
static bool perform(s3_req *r, char err[256]) {
  bool ok = false;
  struct buf url = sb_new(), uri = sb_new();
  char host[256];
  if (!config_ok(err) || !target(r->key, r->query != NULL, &url, &uri, host, err)) goto out;
  if (r->query && *r->query) sb_puts(&url, "?"), sb_puts(&url, r->query);
  for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
    buf_free(&r->resp);
    buf_init(&r->resp, GET_MAX);
    r->status = 0;
    if (r->body && fseeko(r->body, 0, SEEK_SET) != 0) {
      snprintf(err, 256, "s3: cannot rewind upload: %s", ERRNO_TEXT());
      goto out;
    }
    CURLcode cc = send_once(r, buf_ptr(&url), buf_ptr(&uri), host);
    if (cc == CURLE_OK && r->status < 500) {
      ok = true;
      break;
    }
    if (buf_result(&r->resp) != BUF_OK)
      snprintf(err, 256, "s3 %s %.*s: answer too large for memory", r->method, utf8_cut(r->key, 60), r->key);
    else if (r->stalled)
      snprintf(err, 256, "s3 %s %.*s: no answer for %d s", r->method, utf8_cut(r->key, 60), r->key, STALL_S);
    else if (cc != CURLE_OK)
      snprintf(err, 256, "s3 %s %.*s: %s", r->method, utf8_cut(r->key, 60), r->key, curl_easy_strerror(cc));
    else
      snprintf(err, 256, "s3 %s %.*s: server error %ld", r->method, utf8_cut(r->key, 60), r->key, r->status);
    if (cc != CURLE_OK && !transient(cc)) break;
    log_json(LOG_WARN, "s3 call failed",
             json_pack("{s:s,s:s,s:i,s:I,s:s}", "method", r->method, "key", r->key, "attempt", attempt, "status",
                       (json_int_t)r->status, "error", err));
    if (r->status >= 500 && attempt == ATTEMPTS) ok = true; /* an answer, reported by the caller */
    if (attempt < ATTEMPTS) usleep((useconds_t)(200000 * attempt));
  }
out:
  buf_free(&url), buf_free(&uri);
  return ok;
}

/* Fills err from a non-2xx answer: "s3 GET key: 403 SignatureDoesNotMatch: <message>". */
static void answer_error(const s3_req *r, char err[256]) {
  char code[64], message[160];
  xml_text(buf_ptr(&r->resp), "Code", code, sizeof code);
  xml_text(buf_ptr(&r->resp), "Message", message, sizeof message);
  snprintf(err, 256, "s3 %s %.*s: %ld %.40s%s%.*s", r->method, utf8_cut(r->key, 60), r->key, r->status,
           *code ? code : "error", *message ? ": " : "", utf8_cut(message, 100), message);
}

static bool content_type_ok(const char *t) {
  if (strlen(t) >= 128) return false;
  for (; *t; t++)
    if ((unsigned char)*t < 0x20 || *t == 0x7f) return false;
  return true;
}

/* SHA-256 of the whole of f, from its start; *len receives the bytes read. */
static bool hash_file(FILE *f, char out[65], curl_off_t *len) {
  bool ok = false;
  unsigned char md[32], chunk[16384];
  unsigned int mdlen = 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) goto out;
  *len = 0;
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (!EVP_DigestUpdate(ctx, chunk, n)) goto out;
    *len += (curl_off_t)n;
  }
  if (ferror(f) || !EVP_DigestFinal_ex(ctx, md, &mdlen)) goto out;
  hex_encode(md, sizeof md, out);
  ok = true;
out:
  EVP_MD_CTX_free(ctx);
  return ok;
}

bool s3_put_file(const char *key, const char *path, const char *content_type, char err[256]) {
  bool ok = false;
  char hash[65];
  struct stat st;
  s3_req r = {.method = "PUT", .key = key};
  if (!config_ok(err)) goto out;
  if (!content_type || !*content_type) content_type = "application/octet-stream";
  if (!content_type_ok(content_type)) {
    snprintf(err, 256, "s3: content type too long or has control characters");
    goto out;
  }
  r.body = fopen(path, "rb");
  if (!r.body || fstat(fileno(r.body), &st) != 0 || !S_ISREG(st.st_mode)) {
    snprintf(err, 256, "s3: cannot read %.*s: %s", utf8_cut(path, 160), path,
             r.body ? "not a regular file" : ERRNO_TEXT());
    goto out;
  }
  if (!hash_file(r.body, hash, &r.body_len) || r.body_len != (curl_off_t)st.st_size) {
    snprintf(err, 256, "s3: cannot read %.*s whole", utf8_cut(path, 160), path);
    goto out;
  }
  r.payload_hash = hash, r.content_type = content_type;
  if (!perform(&r, err)) goto out;
  if (r.status < 200 || r.status > 299) {
    answer_error(&r, err);
    goto out;
  }
  ok = true;
out:
  if (r.body) fclose(r.body);
  buf_free(&r.resp);
  return ok;
}

bool s3_get(const char *key, char **data, size_t *len, char content_type[128], bool *not_found, char err[256]) {
  bool ok = false;
  s3_req r = {.method = "GET", .key = key, .payload_hash = EMPTY_SHA256};
  *data = NULL, *len = 0, *not_found = false, content_type[0] = 0;
  if (!perform(&r, err)) goto out;
  if (r.status < 200 || r.status > 299) {
    char code[64];
    xml_text(buf_ptr(&r.resp), "Code", code, sizeof code);
    *not_found = r.status == 404 && strcmp(code, "NoSuchBucket"); /* a missing bucket is a fault */
    answer_error(&r, err);
    goto out;
  }
  *data = buf_take(&r.resp, len);
  if (!*data && !(*data = calloc(1, 1))) {
    snprintf(err, 256, "s3: out of memory");
    goto out;
  }
  snprintf(content_type, 128, "%s", r.resp_type);
  ok = true;
out:
  buf_free(&r.resp);
  return ok;
}

/* The text between <tag> and </tag> from at, XML entities decoded, into out; the position
 * after it, or NULL when absent. */
static const char *xml_next(const char *at, const char *tag, char *out, size_t cap) {
  char open[40], close[40];
  snprintf(open, sizeof open, "<%s>", tag), snprintf(close, sizeof close, "</%s>", tag);
  const char *a = strstr(at, open), *b = a ? strstr(a, close) : NULL;
  if (!b) return NULL;
  static const struct {
    const char *entity, c;
  } entities[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  size_t n = 0;
  for (const char *p = a + strlen(open); p < b && n + 1 < cap;) {
    size_t i = 0;
    while (i < ARRAY_LEN(entities) && strncmp(p, entities[i].entity, strlen(entities[i].entity))) i++;
    if (i < ARRAY_LEN(entities))
      out[n++] = entities[i].c, p += strlen(entities[i].entity);
    else
      out[n++] = *p++;
  }
  out[n] = 0;
  return b + strlen(close);
}

bool s3_list(const char *prefix, s3_list_fn fn, void *ctx, char err[256]) {
  char token[1100] = "", key[S3_KEY_MAX + 1], size[32], truncated[8];
  for (;;) {
    /* the canonical query: names sorted, values URI-encoded ('/' included) */
    struct buf q = sb_new();
    if (*token) sb_puts(&q, "continuation-token="), sb_add_query(&q, token), sb_puts(&q, "&");
    sb_puts(&q, "list-type=2&prefix="), sb_add_query(&q, prefix);
    s3_req r = {.method = "GET", .key = "", .payload_hash = EMPTY_SHA256, .query = buf_ptr(&q)};
    bool ok = perform(&r, err);
    buf_free(&q);
    if (ok && (r.status < 200 || r.status > 299)) answer_error(&r, err), ok = false;
    const char *xml = ok ? buf_ptr(&r.resp) : NULL;
    for (const char *at = xml ? strstr(xml, "<Contents>") : NULL; ok && at; at = strstr(at, "<Contents>")) {
      const char *end = strstr(at, "</Contents>");
      if (!end || !xml_next(at, "Key", key, sizeof key) || !xml_next(at, "Size", size, sizeof size)) break;
      if (!fn(ctx, key, strtoll(size, NULL, 10))) ok = false, snprintf(err, 256, "s3: listing stopped");
      at = end;
    }
    bool more = ok && xml_next(xml, "IsTruncated", truncated, sizeof truncated) && !strcmp(truncated, "true") &&
                xml_next(xml, "NextContinuationToken", token, sizeof token) && *token;
    buf_free(&r.resp);
    if (!ok || !more) return ok;
  }
}

bool s3_delete(const char *key, char err[256]) {
  bool ok = false;
  char code[64];
  s3_req r = {.method = "DELETE", .key = key, .payload_hash = EMPTY_SHA256};
  if (!perform(&r, err)) goto out;
  xml_text(buf_ptr(&r.resp), "Code", code, sizeof code);
  if ((r.status < 200 || r.status > 299) && !(r.status == 404 && !strcmp(code, "NoSuchKey"))) {
    answer_error(&r, err);
    goto out;
  }
  ok = true;
out:
  buf_free(&r.resp);
  return ok;
}

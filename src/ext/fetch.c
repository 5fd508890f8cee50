/* One libcurl easy handle per call, no signals (threads), a 1 MiB cap on the answer, connecting
 * within at most 5 s of the deadline. */
#include "ext/fetch.h"
#include "core/util.h"
#include <curl/curl.h>
#include <string.h>

#define MAX_BODY (1024 * 1024)

typedef struct body {
  char *data;
  size_t len;
  bool too_large;
} body;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
  body *b = arg;
  size_t add = size * n;
  if (b->len + add > MAX_BODY) {
    b->too_large = true;
    return 0;
  }
  b->data = xrealloc(b->data, b->len + add + 1);
  memcpy(b->data + b->len, p, add);
  b->len += add;
  b->data[b->len] = 0;
  return add;
}

/* One exchange: method with post_body as JSON, or files as multipart/form-data, or no body. */
static fetch_rc exchange(const char *method, const char *url, const char *bearer, const char *post_body,
                         const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out) {
  *status = 0;
  if (out) *out = NULL;
  CURL *curl = curl_easy_init();
  if (!curl) return FETCH_UNREACHABLE;
  body b = {0};
  curl_mime *mime = NULL;
  struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
  if (bearer) {
    char *auth = xmalloc(strlen(bearer) + 32);
    sprintf(auth, "Authorization: Bearer %s", bearer);
    h = curl_slist_append(h, auth);
    free(auth);
  }
  if (post_body) {
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body);
  } else if (nfiles > 0) {
    mime = curl_mime_init(curl);
    for (int i = 0; i < nfiles; i++) {
      curl_mimepart *part = curl_mime_addpart(mime);
      curl_mime_name(part, files[i].field);
      curl_mime_filedata(part, files[i].path);
    }
    curl_easy_setopt(curl, CURLOPT_MIMEPOST, mime);
  } else if (strcmp(method, "GET")) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
  }
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "marketplace/" MARKETPLACE_VERSION);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  CURLcode cc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
  curl_easy_cleanup(curl);
  curl_mime_free(mime);
  curl_slist_free_all(h);
  fetch_rc rc;
  if (cc == CURLE_OPERATION_TIMEDOUT)
    rc = FETCH_TIMEOUT;
  else if (b.too_large)
    rc = FETCH_BAD_BODY;
  else if (cc != CURLE_OK)
    rc = FETCH_UNREACHABLE;
  else if (*status < 200 || *status > 299)
    rc = FETCH_BAD_STATUS;
  else
    rc = FETCH_OK;
  if (out && cc == CURLE_OK && !b.too_large) {
    *out = b.data ? json_loads(b.data, JSON_DECODE_ANY, NULL) : NULL;
    if (rc == FETCH_OK && !*out) rc = FETCH_BAD_BODY;
  }
  free(b.data);
  return rc;
}

fetch_rc fetch_json(const char *url, long timeout_ms, long *status, json_t **out) {
  return exchange("GET", url, NULL, NULL, NULL, 0, timeout_ms, status, out);
}

fetch_rc fetch_post_json(const char *url, const json_t *payload, long timeout_ms, long *status) {
  return fetch_request("POST", url, NULL, payload, NULL, 0, timeout_ms, status, NULL);
}

fetch_rc fetch_request(const char *method, const char *url, const char *bearer, const json_t *payload,
                       const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out) {
  char *text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
  if (payload && !text) return *status = 0, FETCH_BAD_BODY;
  fetch_rc rc = exchange(method, url, bearer, text, files, nfiles, timeout_ms, status, out);
  free(text);
  return rc;
}

char *fetch_escape(const char *s) {
  char *e = curl_easy_escape(NULL, s, 0);
  char *copy = xstrdup(e ? e : "");
  curl_free(e);
  return copy;
}

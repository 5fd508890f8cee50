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

/* One exchange: a GET, or a POST of post_body as JSON when it is not NULL. */
static fetch_rc exchange(const char *url, const char *post_body, long timeout_ms, long *status, json_t **out) {
  *status = 0;
  if (out) *out = NULL;
  CURL *curl = curl_easy_init();
  if (!curl) return FETCH_UNREACHABLE;
  body b = {0};
  struct curl_slist *h = curl_slist_append(NULL, "Accept: application/json");
  if (post_body) {
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body);
  }
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
  return exchange(url, NULL, timeout_ms, status, out);
}

fetch_rc fetch_post_json(const char *url, const json_t *payload, long timeout_ms, long *status) {
  char *text = json_dumps(payload, JSON_COMPACT);
  if (!text) return FETCH_BAD_BODY;
  fetch_rc rc = exchange(url, text, timeout_ms, status, NULL);
  free(text);
  return rc;
}

char *fetch_escape(const char *s) {
  char *e = curl_easy_escape(NULL, s, 0);
  char *copy = xstrdup(e ? e : "");
  curl_free(e);
  return copy;
}

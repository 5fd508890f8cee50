/* One libcurl easy handle per exchange. fetch_easy_setup holds the settings every transfer
 * shares (S3's too); fetch_exchange adds the method, the header lines and the body, performs,
 * and sorts the outcome: a timeout first, then an answer refused by the cap (the write
 * callback stops the transfer when the capped buffer refuses a piece), then any other
 * transport failure, then the status. The JSON helpers are exchanges with an Accept header and
 * a parse of the answer; a refused answer is a bad body to them, as it always was. */
#include "ext/fetch.h"
#include "core/buf.h"
#include "core/util.h"
#include "db/db.h"
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#define DEFAULT_MAX_ANSWER (1024 * 1024)
#define CONNECT_MAX_MS 5000L

static size_t collect(char *p, size_t size, size_t n, void *arg) {
  size_t add = size * n; /* libcurl passes size 1 */
  return buf_addn(arg, p, add) == BUF_OK ? add : 0;
}

void fetch_easy_setup(void *curl, const char *url, long timeout_ms, long connect_timeout_ms, struct buf *answer) {
  if (!connect_timeout_ms) connect_timeout_ms = timeout_ms < CONNECT_MAX_MS ? timeout_ms : CONNECT_MAX_MS;
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "marketplace/" MARKETPLACE_VERSION);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, answer);
}

/* The request's header lines and body on curl; false when memory ran out. */
static bool describe(CURL *curl, const fetch_req *rq, struct curl_slist **h, curl_mime **mime) {
  for (const char *const *line = rq->headers; line && *line; line++) {
    struct curl_slist *more = curl_slist_append(*h, *line);
    if (!more) return false;
    *h = more;
  }
  if (rq->body) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, rq->body);
  } else if (rq->nfiles > 0) {
    if (!(*mime = curl_mime_init(curl))) return false;
    for (int i = 0; i < rq->nfiles; i++) {
      curl_mimepart *part = curl_mime_addpart(*mime);
      if (!part) return false;
      curl_mime_name(part, rq->files[i].field);
      curl_mime_filedata(part, rq->files[i].path);
    }
    curl_easy_setopt(curl, CURLOPT_MIMEPOST, *mime);
  } else if (strcmp(rq->method, "GET")) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
  }
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, rq->method);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, *h);
  return true;
}

fetch_rc fetch_exchange(const fetch_req *rq, fetch_res *res) {
  fetch_rc rc = FETCH_UNREACHABLE;
  struct curl_slist *h = NULL;
  curl_mime *mime = NULL;
  struct buf answer;
  buf_init(&answer, rq->max_answer ? rq->max_answer : DEFAULT_MAX_ANSWER);
  *res = (fetch_res){.status = 0};
  CURL *curl = curl_easy_init();
  if (!curl || !describe(curl, rq, &h, &mime)) {
    res->error = "out of memory";
    goto out;
  }
  fetch_easy_setup(curl, rq->url, rq->timeout_ms, rq->connect_timeout_ms, &answer);
  if (!db_guard_passed()) { /* the request's token is refused: nothing leaves for it */
    res->error = "the request was refused";
    goto out;
  }
  CURLcode cc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &res->status);
  if (cc == CURLE_OPERATION_TIMEDOUT)
    rc = FETCH_TIMEOUT;
  else if (buf_result(&answer) != BUF_OK)
    rc = FETCH_TOO_LARGE;
  else if (cc != CURLE_OK)
    rc = FETCH_UNREACHABLE;
  else
    rc = res->status >= 200 && res->status <= 299 ? FETCH_OK : FETCH_BAD_STATUS;
  if (rc == FETCH_TOO_LARGE)
    res->error = buf_result(&answer) == BUF_TOO_LARGE ? "answer too large" : "out of memory";
  else if (cc != CURLE_OK)
    res->error = curl_easy_strerror(cc);
  else
    res->body = buf_take(&answer, &res->len);
out:
  if (curl) curl_easy_cleanup(curl);
  curl_mime_free(mime);
  curl_slist_free_all(h);
  buf_free(&answer);
  return rc;
}

void fetch_res_fini(fetch_res *res) {
  free(res->body);
  *res = (fetch_res){.status = 0};
}

/* An exchange whose answer is JSON: json_body as the request's body, or files, or nothing. */
static fetch_rc exchange_json(const char *method, const char *url, const char *bearer, const char *json_body,
                              const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out) {
  const char *headers[4] = {"Accept: application/json"};
  int n = 1;
  char *auth = NULL;
  if (bearer) {
    auth = xmalloc(strlen(bearer) + 32);
    sprintf(auth, "Authorization: Bearer %s", bearer);
    headers[n++] = auth;
  }
  if (json_body) headers[n++] = "Content-Type: application/json";
  fetch_req rq = {.method = method,
                  .url = url,
                  .headers = headers,
                  .body = json_body,
                  .body_len = json_body ? strlen(json_body) : 0,
                  .files = files,
                  .nfiles = nfiles,
                  .timeout_ms = timeout_ms};
  fetch_res res;
  fetch_rc rc = fetch_exchange(&rq, &res);
  free(auth);
  *status = res.status;
  if (rc == FETCH_TOO_LARGE) rc = FETCH_BAD_BODY;
  if (out) {
    *out = res.body ? json_loads(res.body, JSON_DECODE_ANY, NULL) : NULL;
    if (rc == FETCH_OK && !*out) rc = FETCH_BAD_BODY;
  }
  fetch_res_fini(&res);
  return rc;
}

fetch_rc fetch_json(const char *url, long timeout_ms, long *status, json_t **out) {
  return exchange_json("GET", url, NULL, NULL, NULL, 0, timeout_ms, status, out);
}

fetch_rc fetch_post_json(const char *url, const json_t *payload, long timeout_ms, long *status) {
  return fetch_request("POST", url, NULL, payload, NULL, 0, timeout_ms, status, NULL);
}

fetch_rc fetch_request(const char *method, const char *url, const char *bearer, const json_t *payload,
                       const fetch_file *files, int nfiles, long timeout_ms, long *status, json_t **out) {
  if (out) *out = NULL;
  char *text = payload ? json_dumps(payload, JSON_COMPACT) : NULL;
  if (payload && !text) return *status = 0, FETCH_BAD_BODY;
  fetch_rc rc = exchange_json(method, url, bearer, text, files, nfiles, timeout_ms, status, out);
  free(text);
  return rc;
}

char *fetch_escape(const char *s) {
  char *e = curl_easy_escape(NULL, s, 0);
  char *copy = xstrdup(e ? e : "");
  curl_free(e);
  return copy;
}

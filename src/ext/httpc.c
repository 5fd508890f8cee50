/* The answer is collected into a growing buffer and parsed once complete. Time-outs: 5 s to
 * connect, 60 s in all (a local server answering an upload or a payment). */
#include "ext/httpc.h"
#include "core/util.h"
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buffer {
  char *data;
  size_t len;
} buffer;

static size_t collect(char *ptr, size_t size, size_t n, void *userdata) {
  buffer *b = userdata;
  b->data = xrealloc(b->data, b->len + size * n + 1);
  memcpy(b->data + b->len, ptr, size * n);
  b->len += size * n;
  b->data[b->len] = 0;
  return size * n;
}

bool httpc_request(const char *method, const char *url, const char *bearer, json_t *body, const httpc_file *files,
                   int nfiles, long *status, json_t **answer, char err[256]) {
  *answer = NULL;
  CURL *curl = curl_easy_init();
  if (!curl) return snprintf(err, 256, "curl init failed"), false;
  struct curl_slist *headers = NULL;
  curl_mime *mime = NULL;
  char *text = NULL, auth[2048];
  buffer got = {0};
  if (bearer) {
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", bearer);
    headers = curl_slist_append(headers, auth);
  }
  if (body) {
    text = json_dumps(body, JSON_COMPACT);
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, text);
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
  curl_easy_setopt(curl, CURLOPT_URL, url);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &got);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 5L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) {
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    if (got.data) *answer = json_loads(got.data, JSON_DECODE_ANY, NULL);
  } else {
    snprintf(err, 256, "%s %s: %s", method, url, curl_easy_strerror(rc));
  }
  curl_mime_free(mime);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  free(text);
  free(got.data);
  return rc == CURLE_OK;
}

/* Background recognition of uploaded documents (queue kinds "licence_check" and
 * "insurance_check"). A job names the keys it was queued for; its result is written only
 * while those keys are still the provider's documents, so a slow check of a replaced upload
 * never overwrites the newer one's status. A document that cannot be fetched is retried
 * (storage may be briefly unreachable); recognition that cannot run sets status "error". One
 * interrupted by the service's shutdown is handed back as it was, to run again after it. */
#include "core/buf.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include "domain/providers/recognition.h"
#include "ext/ocr.h"
#include "ext/queue.h"
#include "ext/storage.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* OCR of one stored document into *out; false (with err) when it could not be fetched. */
static bool read_document(const char *key, ocr_text *out, bool *recognized, char err[256]) {
  char *path = storage_fetch_to_temp(key);
  if (!path) return snprintf(err, 256, "cannot fetch %s", key), false;
  char why[256] = "";
  const char *dot = strrchr(key, '.');
  *recognized = dot && !strcmp(dot, ".pdf") ? ocr_pdf(path, out, why) : ocr_image(path, out, why);
  unlink(path);
  free(path);
  if (!*recognized && ocr_interrupted()) { /* the service is stopping: the check is handed back whole */
    queue_retry_at(clock_now_ms());        /* without using up an attempt */
    return snprintf(err, 256, "%s", why), false;
  }
  if (!*recognized) log_msg(LOG_WARN, "recognition unavailable for %s: %s", key, why);
  return true;
}

bool providers_check_licence(json_t *job, char err[256]) {
  const char *provider = json_string_value(json_object_get(job, "providerId"));
  const char *front = json_string_value(json_object_get(job, "front"));
  const char *back = json_string_value(json_object_get(job, "back"));
  if (!provider) return snprintf(err, 256, "job without providerId"), false;
  licence_result res = {0};
  struct buf text; /* both sides' text, each followed by a line break */
  buf_init(&text, BUF_CAP_MAX);
  double confidence = 0, weight = 0; /* weighted by text length: a barcode-only back barely counts */
  int sides = 0;
  bool available = true;
  const char *keys[] = {front, back};
  for (int i = 0; i < 2; i++) {
    if (!keys[i]) continue;
    ocr_text t = {0};
    bool recognized;
    if (!read_document(keys[i], &t, &recognized, err)) {
      buf_free(&text);
      return false;
    }
    if (!recognized) {
      available = false;
      continue;
    }
    size_t len = strlen(t.text);
    buf_add(&text, t.text), buf_add(&text, "\n");
    confidence += t.confidence * (double)(len + 1), weight += (double)(len + 1), sides++;
    ocr_text_free(&t);
  }
  if (buf_result(&text) != BUF_OK) oom();
  if (available && sides > 0)
    recognize_licence(buf_ptr(&text), confidence / weight, clock_now_ms(), &res);
  else
    snprintf(res.status, sizeof res.status, "error");
  buf_free(&text);
  if (prov_store_record_licence(provider, front, back, &res) != ERR_OK)
    return snprintf(err, 256, "cannot record the licence check"), false;
  return true;
}

bool providers_check_insurance(json_t *job, char err[256]) {
  const char *provider = json_string_value(json_object_get(job, "providerId"));
  const char *key = json_string_value(json_object_get(job, "key"));
  if (!provider || !key) return snprintf(err, 256, "job without providerId or key"), false;
  insurance_result res = {0};
  ocr_text t = {0};
  bool recognized;
  if (!read_document(key, &t, &recognized, err)) return false;
  if (recognized)
    recognize_insurance(t.text, clock_now_ms(), &res);
  else
    snprintf(res.status, sizeof res.status, "error");
  ocr_text_free(&t);
  if (prov_store_record_insurance(provider, key, &res) != ERR_OK)
    return snprintf(err, 256, "cannot record the insurance check"), false;
  return true;
}

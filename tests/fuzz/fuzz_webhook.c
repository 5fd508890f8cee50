/* POST /webhooks: the Stripe-Signature header and the event payload (payments_webhook_check
 * and payments_webhook_event). Input: "<header>\n<body>". The first byte chooses whether the
 * header is used as given or replaced by a valid signature of the body at the fuzzer's "now",
 * so the event parsing behind the check is reached. Properties: a valid signature is
 * accepted; a header the fuzzer wrote is accepted only if it carries that same signature. */
#include "domain/payments/payments_api.h"
#include "ext/digest.h"
#include "fuzz.h"
#include <jansson.h>
#include <string.h>

#define SECRET "whsec_fuzz"
#define NOW_S (FUZZ_NOW_MS / 1000)

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  bool sign = data[0] & 1;
  data++, size--;
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl) return 0;
  char *header = fuzz_strndup(data, (size_t)(nl - data));
  const char *body = (const char *)nl + 1;
  size_t len = size - (size_t)(nl - data) - 1;
  char valid[128];
  {
    char prefix[32], mac[65];
    size_t plen = (size_t)snprintf(prefix, sizeof prefix, "%lld.", (long long)NOW_S);
    char *msg = malloc(plen + len + 1);
    memcpy(msg, prefix, plen);
    if (len) memcpy(msg + plen, body, len);
    hmac_sha256_hex(SECRET, strlen(SECRET), msg, plen + len, mac);
    free(msg);
    snprintf(valid, sizeof valid, "t=%lld,v1=%s", (long long)NOW_S, mac);
  }
  const char *problem = payments_webhook_check(SECRET, sign ? valid : header, body, len, NOW_S);
  if (sign)
    FUZZ_CHECK(!problem, "a valid signature was refused: %s", problem);
  else if (!problem)
    FUZZ_CHECK(strstr(header, strchr(valid, ',') + 1), "accepted a forged header '%s'", header);
  if (!problem) {
    json_t *event, *object;
    const char *id, *type;
    const char *bad = payments_webhook_event(body, len, &event, &id, &type, &object);
    if (!bad) FUZZ_CHECK(id && *id && type && *type && json_is_object(object), "incomplete event accepted");
    json_decref(event);
  }
  free(header);
  return 0;
}

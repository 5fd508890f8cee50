/* JWT verification (token_verify over libjwt). Two modes, by the first byte:
 * - raw: the rest is the token text as a client sends it;
 * - signed: the rest is "<header JSON>\n<payload JSON>", which the target encodes and signs
 *   with the service's own secret, so the claims parsing behind the signature check is
 *   reached too.
 * Properties: a raw token is never accepted (the fuzzer cannot forge the HMAC); an accepted
 * signed token has alg HS256 in its header, an id and a role, and has not expired. */
#include "core/clock.h"
#include "ext/token.h"
#include "fuzz.h"
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

static size_t b64url(const unsigned char *in, size_t n, char *out) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    out[o++] = tab[v >> 18 & 63], out[o++] = tab[v >> 12 & 63];
    if (i + 1 < n) out[o++] = tab[v >> 6 & 63];
    if (i + 2 < n) out[o++] = tab[v & 63];
  }
  out[o] = 0;
  return o;
}

static void check_signed(const uint8_t *data, size_t size) {
  const uint8_t *nl = memchr(data, '\n', size);
  if (!nl) return;
  size_t hlen = (size_t)(nl - data), plen = size - hlen - 1;
  char *token = malloc((hlen + plen) * 2 + 128);
  size_t n = b64url(data, hlen, token);
  token[n++] = '.';
  n += b64url(nl + 1, plen, token + n);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned maclen = 0;
  HMAC(EVP_sha256(), FUZZ_JWT_SECRET, (int)strlen(FUZZ_JWT_SECRET), (const unsigned char *)token, n, mac, &maclen);
  token[n++] = '.';
  b64url(mac, maclen, token + n);
  token_claims c;
  if (token_verify(token, &c)) {
    char *text = fuzz_strndup(data, hlen); /* libjwt reads the decoded header as a C string */
    json_t *header = json_loads(text, JSON_DISABLE_EOF_CHECK, NULL);
    free(text);
    const char *alg = json_string_value(json_object_get(header, "alg"));
    FUZZ_CHECK(alg && !strcmp(alg, "HS256"), "accepted a token whose header says alg %s", alg ? alg : "(none)");
    FUZZ_CHECK(c.id[0] && c.role[0], "accepted a token without id or role");
    FUZZ_CHECK(c.exp > clock_now_ms() / 1000, "accepted an expired token (exp %lld)", (long long)c.exp);
    json_decref(header);
  }
  free(token);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (data[0] & 1) {
    check_signed(data + 1, size - 1);
    return 0;
  }
  char *token = fuzz_strndup(data + 1, size - 1);
  token_claims c;
  FUZZ_CHECK(!token_verify(token, &c), "accepted an unsigned token");
  free(token);
  return 0;
}

/* SHA-256 and HMAC-SHA256 through OpenSSL's one-shot functions. */
#include "ext/digest.h"
#include "core/config.h"
#include "core/util.h"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

void sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  hex_encode(md, 32, out);
}

void hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key, (int)keylen, data, len, md, &n);
  hex_encode(md, 32, out);
}

void secret_derive_hex(const char *label, char out[65]) {
  hmac_sha256_hex(CFG.jwt_secret, CFG.jwt_secret_len, label, strlen(label), out);
}

bool digest_equal(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la != lb) return false;
  return CRYPTO_memcmp(a, b, la) == 0;
}

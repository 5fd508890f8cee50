/* SHA-256 and HMAC-SHA256 through OpenSSL's one-shot functions, and a file's SHA-256 read in
 * pieces. */
#include "ext/digest.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <unistd.h>

void secret_new_hex(char secret[65], char hash[65]) {
  unsigned char raw[32];
  random_bytes(raw, sizeof raw);
  hex_encode(raw, sizeof raw, secret);
  sha256_hex(secret, 64, hash);
}

void sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  hex_encode(md, 32, out);
}

bool sha256_file_hex(const char *path, char out[65]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
  unsigned char piece[16 * 1024];
  for (ssize_t n; ok && (n = read(fd, piece, sizeof piece)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0 && EVP_DigestUpdate(ctx, piece, (size_t)n) == 1;
  }
  unsigned char md[32];
  unsigned int len = 0;
  ok = ok && EVP_DigestFinal_ex(ctx, md, &len) == 1;
  if (ok) hex_encode(md, 32, out);
  EVP_MD_CTX_free(ctx);
  close(fd);
  return ok;
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

/* Allocation that never returns NULL, and a few string and file helpers used everywhere. */
#include "core/util.h"
#include "core/buf.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

_Noreturn void oom(void) {
  fputs("fatal: out of memory\n", stderr);
  abort();
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) oom();
  return p;
}

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) oom();
  return p;
}

void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) oom();
  return p;
}

char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (!p) oom();
  return p;
}

_Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fatal: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  char chunk[16384];
  size_t r;
  while ((r = fread(chunk, 1, sizeof chunk, f)) > 0)
    if (buf_addn(&b, chunk, r) != BUF_OK) oom();
  fclose(f);
  char *text = buf_take(&b, len);
  return text ? text : xstrdup("");
}

bool mkdir_p(const char *path) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return false;
    *p = '/';
  }
  return mkdir(tmp, 0700) == 0 || errno == EEXIST;
}

size_t uint_digits(uint64_t v, char *out) {
  char tmp[20];
  size_t n = 0;
  do tmp[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

void hex_encode(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) out[2 * i] = digits[in[i] >> 4], out[2 * i + 1] = digits[in[i] & 15];
  out[2 * n] = 0;
}

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t b64url_encode(const unsigned char *in, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
    size_t chars = n - i >= 3 ? 4 : n - i + 1;
    for (size_t c = 0; c < chars; c++) out[o++] = B64URL[(v >> (18 - 6 * c)) & 63];
  }
  out[o] = 0;
  return o;
}

/* Each character's value in B64URL plus one, 0 for a character outside it: every request's token
 * is decoded, and a strchr per character was 3% of GET /users/me's CPU. */
static const unsigned char b64url_value[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,  ['H'] = 8,
    ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15, ['P'] = 16,
    ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24,
    ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32,
    ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40,
    ['o'] = 41, ['p'] = 42, ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48,
    ['w'] = 49, ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['-'] = 63, ['_'] = 64};

bool b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap, size_t *len) {
  while (n && in[n - 1] == '=') n--;
  if (n % 4 == 1) return false;
  uint32_t acc = 0;
  int bits = 0;
  *len = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned v = b64url_value[(unsigned char)in[i]];
    if (!v) return false;
    acc = (acc << 6 | (v - 1)) & 0xFFFFFF;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (*len >= cap) return false;
      out[(*len)++] = (unsigned char)(acc >> bits);
    }
  }
  return (acc & ((1u << bits) - 1)) == 0; /* the unused low bits of the last character are zero */
}

uint64_t fnv1a_byte(uint64_t h, unsigned char b) { return (h ^ b) * 1099511628211ULL; }

uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) h = fnv1a_byte(h, (unsigned char)*s);
  return h;
}

bool str_starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

const char *errno_text(int err, char *buf, size_t cap) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return strerror_r(err, buf, cap); /* the GNU variant: returns the text, maybe not in buf */
#else
  return strerror_r(err, buf, cap) == 0 ? buf : "unknown error";
#endif
}

void thread_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stopping) {
  pthread_mutex_lock(mu);
  *stopping = true;
  pthread_cond_signal(cv);
  pthread_mutex_unlock(mu);
  pthread_join(thread, NULL);
}

/* Process-lifetime allocation helpers (abort on out-of-memory) and small string helpers. */
#ifndef CORE_UTIL_H
#define CORE_UTIL_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Prints "fatal: out of memory" and aborts: what every x* allocator does when malloc fails. */
_Noreturn void oom(void);
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* Prints "fatal: <msg>" to stderr and exits 1. */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Ends a thread that waits on cv (under mu) until *stopping: sets *stopping under mu, wakes the
 * thread and waits for it to return. */
void thread_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stopping);
/* Reads a whole file into a new NUL-terminated heap buffer; NULL when unreadable. */
char *read_file(const char *path, size_t *len);
/* Creates a directory and its parents (mode 0700); true on success or when it exists. */
bool mkdir_p(const char *path);
/* The decimal digits of v into out (at most 20, no NUL); returns how many. */
size_t uint_digits(uint64_t v, char *out);
/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hex_encode(const unsigned char *in, size_t n, char *out);
/* Base64url without padding (RFC 4648 section 5) of n bytes into out (4 * ceil(n / 3) + 1
 * bytes is enough); returns the text's length. */
size_t b64url_encode(const unsigned char *in, size_t n, char *out);
/* Decodes n characters of base64url, unpadded or '='-padded, into out (cap bytes; n * 3 / 4 is
 * enough); false on a character outside the alphabet, a length no encoding has, a last
 * character that is not canonical, or more than cap bytes. *len gets the bytes. */
bool b64url_decode(const char *in, size_t n, unsigned char *out, size_t cap, size_t *len);
bool str_starts_with(const char *s, const char *prefix);
/* 64-bit FNV-1a of s, continuing from h: start from FNV1A_BASIS, add more strings (or bytes,
 * fnv1a_byte) to hash several parts. For in-process hash tables, not for anything stored. */
#define FNV1A_BASIS 14695981039346656037ULL
uint64_t fnv1a(uint64_t h, const char *s);
uint64_t fnv1a_byte(uint64_t h, unsigned char b);
/* The message of errno value err through strerror_r (strerror may share one buffer between
 * threads); the text is in buf or a static string. */
const char *errno_text(int err, char *buf, size_t cap);
/* errno's message, in a buffer that lives until the end of the enclosing block. */
#define ERRNO_TEXT() errno_text(errno, (char[128]){0}, 128)

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif

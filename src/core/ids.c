/* Identifiers from getrandom(2). Rejection sampling keeps base-36 digits uniform. */
#include "core/ids.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

void random_bytes(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      perror("getrandom");
      abort();
    }
    p += r, n -= (size_t)r;
  }
}

void id_new(char out[ID_LEN + 1]) {
  static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  unsigned char buf[48];
  size_t used = sizeof buf;
  out[0] = 'c';
  for (int i = 1; i < ID_LEN;) {
    if (used == sizeof buf) random_bytes(buf, sizeof buf), used = 0;
    unsigned char b = buf[used++];
    if (b >= 252) continue; /* 252 = 7 * 36: keeps the distribution uniform */
    out[i++] = alphabet[b % 36];
  }
  out[ID_LEN] = 0;
}

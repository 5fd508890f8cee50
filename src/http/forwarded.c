/* X-Forwarded-For, read from the right: the lines are walked last to first and each line's
 * entries right to left, counting non-empty entries until the trusted-th; only the entry
 * picked is parsed (inet_pton, after stripping a port or IPv6 brackets), so what a client
 * wrote further left costs nothing and can never be chosen. The group a client is counted in
 * (its /64 for IPv6) is computed from the parsed address, so every spelling of one network
 * gives the same text. */
#include "http/forwarded.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

void hs_forwarded_add(hs_forwarded *f, const char *value) {
  if (f->n == HS_FORWARDED_LINES) memmove(f->lines, f->lines + 1, sizeof f->lines - sizeof *f->lines), f->n--;
  f->lines[f->n++] = value;
}

/* Parses one list entry into its canonical text; false when it is not an address. */
static bool forwarded_address(const char *s, size_t n, char out[INET6_ADDRSTRLEN]) {
  char buf[INET6_ADDRSTRLEN + 8];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n), buf[n] = 0;
  char *a = buf, *colon = strchr(buf, ':');
  if (*a == '[') { /* [v6]:port */
    char *end = strchr(a, ']');
    if (!end) return false;
    *end = 0, a++;
  } else if (colon && !strchr(colon + 1, ':')) { /* v4:port */
    *colon = 0;
  }
  struct in6_addr v6;
  struct in_addr v4;
  if (inet_pton(AF_INET, a, &v4) == 1) return inet_ntop(AF_INET, &v4, out, INET6_ADDRSTRLEN) != NULL;
  if (inet_pton(AF_INET6, a, &v6) == 1) return inet_ntop(AF_INET6, &v6, out, INET6_ADDRSTRLEN) != NULL;
  return false;
}

bool hs_forwarded_client(const hs_forwarded *f, int trusted, char out[INET6_ADDRSTRLEN]) {
  const char *pick = NULL;
  size_t pick_len = 0;
  int seen = 0;
  for (int line = f->n - 1; line >= 0 && seen < trusted; line--) {
    const char *v = f->lines[line], *end = v + strlen(v);
    while (end > v && seen < trusted) {
      const char *start = end;
      while (start > v && start[-1] != ',') start--;
      const char *a = start, *b = end;
      while (a < b && (*a == ' ' || *a == '\t')) a++;
      while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
      if (b > a) pick = a, pick_len = (size_t)(b - a), seen++;
      end = start > v ? start - 1 : v;
    }
  }
  return pick && forwarded_address(pick, pick_len, out);
}

void hs_address_group(const char *ip, char out[HS_ADDRESS_GROUP_LEN]) {
  struct in6_addr v6;
  struct in_addr v4;
  if (ip && inet_pton(AF_INET6, ip, &v6) == 1) {
    if (IN6_IS_ADDR_V4MAPPED(&v6)) {
      memcpy(&v4, v6.s6_addr + 12, sizeof v4);
      if (inet_ntop(AF_INET, &v4, out, HS_ADDRESS_GROUP_LEN)) return;
    } else {
      memset(v6.s6_addr + 8, 0, 8);
      char net[INET6_ADDRSTRLEN];
      if (inet_ntop(AF_INET6, &v6, net, sizeof net)) {
        snprintf(out, HS_ADDRESS_GROUP_LEN, "%s/64", net);
        return;
      }
    }
  }
  snprintf(out, HS_ADDRESS_GROUP_LEN, "%s", ip ? ip : "unknown");
}

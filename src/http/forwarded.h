/* The client's address behind trusted proxies (TRUST_PROXY, X-Forwarded-For), as pure
 * functions of the header lines: no connection, no configuration. */
#ifndef HTTP_FORWARDED_H
#define HTTP_FORWARDED_H
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#define HS_FORWARDED_LINES 16

/* Every X-Forwarded-For line of a request, in arrival order: repeated lines are one
 * comma-separated list (RFC 9110, 5.3), and a proxy may add its own line after the one the
 * client wrote. Only the last HS_FORWARDED_LINES lines are kept (the client's own come first). */
typedef struct hs_forwarded {
  const char *lines[HS_FORWARDED_LINES]; /* borrowed: they must outlive the struct */
  int n;
} hs_forwarded;

/* Adds the next X-Forwarded-For line (value borrowed), dropping the oldest past the limit. */
void hs_forwarded_add(hs_forwarded *f, const char *value);
/* With `trusted` proxies in front (TRUST_PROXY > 0), the client is the trusted-th address from
 * the right of the lines read as one list: each trusted proxy appends the address it saw, so
 * entries further left are whatever the client wrote and are never read. A shorter list (the
 * request passed fewer proxies) gives its leftmost entry, which a trusted proxy wrote. Entries
 * may be "203.0.113.7", "2001:db8::1", "[2001:db8::1]:443" or "203.0.113.7:80" (spaces and
 * tabs around them ignored); out receives the address in canonical text. False when the entry
 * picked is not an address, or there is none. */
bool hs_forwarded_client(const hs_forwarded *f, int trusted, char out[INET6_ADDRSTRLEN]);

#endif

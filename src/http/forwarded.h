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

/* Room for hs_address_group's answer: an IPv6 address and "/64". */
#define HS_ADDRESS_GROUP_LEN (INET6_ADDRSTRLEN + 4)

/* The part of a client address that rate limits and the login throttle count (out: canonical
 * text): an IPv4 address whole; an IPv6 address by its first 64 bits, "2001:db8:1:2::/64", since
 * a subscriber is given a whole /64 and may use any address in it; an IPv4-mapped IPv6 address
 * (::ffff:198.51.100.7) as its IPv4 address. Anything else (NULL: "unknown") is copied as it is,
 * cut to fit. */
void hs_address_group(const char *ip, char out[HS_ADDRESS_GROUP_LEN]);

#endif

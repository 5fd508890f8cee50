/* The allow-list of redirectUrl and the building of app links (domain/links.h). The list is
 * read from CFG.app_redirect_urls, which config.c checked and normalised at start-up (lowercase,
 * no trailing slash, comma-separated), so a look-up is a scan of a short string. */
#include "domain/links.h"
#include "core/config.h"
#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Schemes no listing makes a link target: they run or read things where the link is opened. */
static const char *const NEVER[] = {"javascript", "data", "vbscript", "file", "blob", "about", NULL};

/* True when the n bytes at s, lowercased, are one entry of APP_REDIRECT_URLS. */
static bool listed(const char *s, size_t n) {
  for (const char *p = CFG.app_redirect_urls; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && !strncasecmp(p, s, n)) return true;
    if (!end) break;
    p = end + 1;
  }
  return false;
}

bool links_allowed(const char *url) {
  for (const unsigned char *p = (const unsigned char *)url; *p; p++)
    if (*p <= 0x20 || *p >= 0x7f || strchr("\"<>\\^`{|}", *p)) return false;
  if (!isalpha((unsigned char)url[0])) return false;
  size_t scheme = 1;
  while (url[scheme] && (isalnum((unsigned char)url[scheme]) || strchr("+.-", url[scheme]))) scheme++;
  if (url[scheme] != ':') return false;
  for (const char *const *n = NEVER; *n; n++)
    if (strlen(*n) == scheme && !strncasecmp(url, *n, scheme)) return false;
  bool web = (scheme == 4 && !strncasecmp(url, "http", 4)) || (scheme == 5 && !strncasecmp(url, "https", 5));
  if (strncmp(url + scheme, "://", 3)) return false; /* "myapp:x" is not of the listed form "myapp://" */
  if (!web) {                                        /* a custom scheme: "myapp://" listed allows every address of it */
    char entry[80];
    if (scheme + 4 > sizeof entry) return false;
    memcpy(entry, url, scheme);
    memcpy(entry + scheme, "://", 4);
    return listed(entry, scheme + 3);
  }
  const char *host = url + scheme + 3;
  size_t authority = strcspn(host, "/?#");
  if (authority == 0 || memchr(host, '@', authority)) return false; /* https://app.example.com@evil.example */
  return listed(url, (size_t)(host - url) + authority);
}

err_t links_redirect(hs_req *req, const char **out) {
  *out = json_string_value(json_object_get(req->body, "redirectUrl"));
  if (!*out || links_allowed(*out)) return ERR_OK;
  *out = NULL;
  return hs_fail_invalid(req, "redirectUrl: " LINKS_REFUSED);
}

const char *links_app(arena *a, const char *redirect, const char *path, const char *params) {
  const char *base = redirect ? redirect : arena_printf(a, "%s%s", CFG.app_url, path);
  if (!params || !*params) return base;
  size_t cut = strcspn(base, "#");
  const char *query = memchr(base, '?', cut);
  char last = cut ? base[cut - 1] : 0;
  const char *sep = !query ? "?" : (last == '?' || last == '&') ? "" : "&";
  return arena_printf(a, "%.*s%s%s%s", (int)cut, base, sep, params, base + cut);
}

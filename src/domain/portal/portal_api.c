/* The staff portal's page and assets. The page is one small HTML document with no inline script
 * and no inline style, so its rows (ROUTE_PAGE) carry a Content-Security-Policy that allows
 * scripts and style sheets from this server only (http/answer.c). The app keeps the staff token
 * in memory; nothing here reads or sets a cookie. */
#include "domain/portal/portal_api.h"
#include "core/util.h"
#include "http/portal_asset.h"
#include <string.h>

static const char PAGE[] = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                           "<title>Staff portal</title>\n<link rel=\"icon\" href=\"data:,\">\n"
                           "<link rel=\"stylesheet\" href=\"/portal/portal.css\">\n"
                           "<script src=\"/portal/portal.js\" defer></script>\n</head>\n<body>\n"
                           "<div id=\"app\"><p class=\"loading\">Loading the staff portal…</p></div>\n"
                           "<noscript><p>The staff portal needs JavaScript.</p></noscript>\n</body>\n</html>\n";

static err_t asset(hs_req *req, const char *start, const char *end, const char *type) {
  size_t len = (size_t)(end - start);
  char *copy = xmalloc(len);
  memcpy(copy, start, len);
  req->res_cache_control = "no-cache"; /* the next build's bundle is taken at once */
  return hs_reply_file(req, -1, copy, len, type);
}

err_t api_portal_page(hs_req *req) {
  req->res_cache_control = "no-cache";
  return hs_reply_file(req, -1, xstrdup(PAGE), strlen(PAGE), "text/html; charset=utf-8");
}

/* The bundle's script or style sheet, by the route's path. */
err_t api_portal_asset(hs_req *req) {
  if (strstr(req->route->path, ".css")) return asset(req, hs_portal_css, hs_portal_css_end, "text/css; charset=utf-8");
  return asset(req, hs_portal_js, hs_portal_js_end, "application/javascript; charset=utf-8");
}

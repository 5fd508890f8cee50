/* The API's own documentation: GET /openapi.json (generated from the route table, built once
 * and shared read-only by every request), GET /docs (Redoc's reference page) and the Redoc
 * bundle it loads from this server, so the page needs no other host. */
#include "core/util.h"
#include "domain/system/system.h"
#include "http/docs_asset.h"
#include "http/openapi.h"
#include "http/router.h"
#include <pthread.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static json_t *document;

static void build(void) {
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  document = hs_openapi_document(rows, n);
}

static err_t api_openapi(hs_req *req) {
  pthread_once(&once, build);
  return hs_ok(req, json_incref(document));
}

static const char DOCS_PAGE[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>Home-services marketplace API</title>\n<style>body { margin: 0; }</style>\n</head>\n<body>\n"
    "<redoc spec-url=\"/openapi.json\"></redoc>\n<script src=\"/docs/redoc.standalone.js\"></script>\n"
    "</body>\n</html>\n";

static err_t api_docs(hs_req *req) {
  req->res_cache_control = "no-cache";
  return hs_reply_file(req, -1, xstrdup(DOCS_PAGE), strlen(DOCS_PAGE), "text/html; charset=utf-8");
}

static err_t api_docs_script(hs_req *req) {
  size_t len = (size_t)(hs_redoc_js_end - hs_redoc_js);
  char *copy = xmalloc(len);
  memcpy(copy, hs_redoc_js, len);
  req->res_cache_control = "public, max-age=86400";
  return hs_reply_file(req, -1, copy, len, "application/javascript; charset=utf-8");
}

const hs_route DOCS_ROUTES[] = {
    {HS_GET, "/openapi.json", api_openapi, ROLE_OPEN, .summary = "This API's OpenAPI 3.1 document",
     .response = "OpenApiDocument"},
    {HS_GET, "/docs", api_docs, ROLE_OPEN, .summary = "The API reference page (Redoc)", .response = "text/html"},
    {HS_GET, "/docs/redoc.standalone.js", api_docs_script, ROLE_OPEN,
     .summary = "The reference page's script, served from this server", .response = "application/javascript"},
};
const size_t DOCS_ROUTES_LEN = ARRAY_LEN(DOCS_ROUTES);

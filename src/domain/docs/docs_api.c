/* The API's own documentation: GET /openapi.json (generated from the route table, built once
 * and shared read-only by every request), GET /docs (Redoc's reference page) and the Redoc
 * bundle it loads from this server, so the page needs no other host. */
#include "domain/docs/docs_api.h"
#include "core/util.h"
#include "http/docs_asset.h"
#include "http/openapi.h"
#include "http/router.h"
#include <pthread.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
/* A jansson tree, not a row table or the writer: the document is assembled from parts (the
 * route rows, the domains' schema files, the event kinds) and edited as they are merged. */
static json_t *document;

static void build(void) {
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  document = hs_openapi_document(rows, n);
}

err_t api_openapi(hs_req *req) {
  pthread_once(&once, build);
  return hs_ok(req, json_incref(document));
}

static const char DOCS_PAGE[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    "<title>Home-services marketplace API</title>\n<style>body { margin: 0; }</style>\n</head>\n<body>\n"
    "<redoc spec-url=\"/openapi.json\"></redoc>\n<script src=\"/docs/redoc.standalone.js\"></script>\n"
    "</body>\n</html>\n";

err_t api_docs(hs_req *req) {
  req->res_cache_control = "no-cache";
  return hs_reply_file(req, -1, xstrdup(DOCS_PAGE), strlen(DOCS_PAGE), "text/html; charset=utf-8");
}

err_t api_docs_script(hs_req *req) {
  size_t len = (size_t)(hs_redoc_js_end - hs_redoc_js);
  char *copy = xmalloc(len);
  memcpy(copy, hs_redoc_js, len);
  req->res_cache_control = "public, max-age=86400";
  return hs_reply_file(req, -1, copy, len, "application/javascript; charset=utf-8");
}

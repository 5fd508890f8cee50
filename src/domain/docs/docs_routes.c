/* Routes of the API's own documentation. */
#include "domain/docs/docs_api.h"

const hs_route docs_routes[] = {
    {HS_GET, "/openapi.json", api_openapi, ROLE_OPEN, .summary = "This API's OpenAPI 3.1 document",
     .response = "OpenApiDocument"},
    {HS_GET, "/docs", api_docs, ROLE_OPEN, .summary = "The API reference page (Redoc)", .response = "text/html"},
    {HS_GET, "/docs/redoc.standalone.js", api_docs_script, ROLE_OPEN,
     .summary = "The reference page's script, served from this server", .response = "application/javascript"},
    {0},
};

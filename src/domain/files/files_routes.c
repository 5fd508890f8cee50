/* Routes of /files. */
#include "domain/files/files_api.h"

static const hs_field file_query_fields[] = {
    {"expires", F_STRING},
    {"sig", F_STRING},
    {0},
};
static const hs_schema file_query = {file_query_fields};

const hs_route files_routes[] = {
    {HS_GET, "/files/:key", api_files_get, ROLE_OPEN, .query = &file_query, .flags = ROUTE_SLOW | ROUTE_ETAG,
     .summary = "A stored file, through its signed URL (ETag, If-None-Match, cacheable until the link expires)",
     .response = "application/octet-stream", .errors = ERRORS(ERR_FORBIDDEN, ERR_NOT_FOUND)},
    {0},
};

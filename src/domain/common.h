/* Vocabulary shared by every domain. */
#ifndef DOMAIN_COMMON_H
#define DOMAIN_COMMON_H
#include "http/http.h"
#include <jansson.h>
#include <stdbool.h>

/* The four services, NULL-terminated (F_ENUM choices). */
extern const char *const SERVICE_NAMES[];
/* The seven job statuses in lifecycle order, NULL-terminated (F_ENUM choices). */
#define JOB_STATUS_COUNT 7
extern const char *const JOB_STATUS_NAMES[];

/* { email, password (1 to 1024 characters: it is only compared) }: the body of every login
 * (customers', providers', staff's, the administrator's). */
extern const hs_schema common_login_schema;

/* A provider's lists as fields of a body: its service ZIPs (1 to 500) and its services (1 to 4),
 * each also taken as a single value; flags: F_REQUIRED, or 0 where they may be left out. */
extern const hs_field common_zip_item, common_service_item;
#define COMMON_PROVIDER_LISTS(flags)                                                                                   \
  {"serviceZips", F_ARRAY, (flags) | F_ONE_OR_MANY, LEN(1, 500), .item = &common_zip_item}, {                          \
    "services", F_ARRAY, (flags) | F_ONE_OR_MANY, LEN(1, 4), .item = &common_service_item                              \
  }

/* A point as two optional fields of a body or query: its latitude (-90 to 90) and longitude
 * (-180 to 180), named lat and lng. */
#define COMMON_POINT(lat, lng)                                                                                         \
  {lat, F_NUMBER, 0, RANGE(-90, 90)}, { lng, F_NUMBER, 0, RANGE(-180, 180) }

/* Moves n received files into storage, all or none: their keys are appended to keys (a JSON
 * array). When one cannot be stored, the ones this call stored are deleted again and false is
 * returned (the failure is logged). */
bool common_store_uploads(hs_upload **files, int n, json_t *keys);
/* Deletes the stored object of every string in keys (a JSON array; NULL counts as empty). */
void common_delete_stored(const json_t *keys);
/* Appends to keys (a JSON array) the storage keys a stored cell names: a key, a JSON array of
 * keys, or a photo message's "[IMAGE]<signed URL or key>". NULL and other text add nothing. */
void common_cell_keys(json_t *keys, const char *cell);

/* Answers 200 text/html: fmt with each %s replaced by the next of values, HTML-escaped (a
 * value may be NULL: nothing). For the pages of emailed links. */
err_t common_reply_html(hs_req *req, const char *fmt, const char *const *values);
/* The same for a page whose title is also its heading: body is the fmt of what follows the
 * heading (title: text without markup or %). */
err_t common_reply_page(hs_req *req, const char *title, const char *body, const char *const *values);
/* The same page answered with status (a refusal: 400, 409, ...) instead of the route's own. */
err_t common_reply_page_as(hs_req *req, int status, const char *title, const char *body, const char *const *values);

/* The account an impersonation acts as: its id, name, email, role and token generation. */
typedef struct impersonated {
  const char *id, *name, *email, *role;
  int64_t gen;
} impersonated;
/* Issues a token that acts as account who for ttl seconds (under elevation_id: a staff
 * member's elevation; NULL: the administrator's) and answers it as an Impersonation
 * `{ token, identity: { id, name, email, role } }`. */
err_t common_reply_impersonation(hs_req *req, const impersonated *who, const char *elevation_id, int64_t ttl);

#endif

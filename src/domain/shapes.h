/* JSON shapes that more than one domain writes: the Job JSON (decisions.md), assembled from
 * the parts stored with each job, and the Quote JSON. A piece under the domains, so jobs and
 * quotes do not call each other for them.
 *
 * Stored parts (migration 0012, docs/internals/job-json.md): jobs.json_head is the Job JSON up
 * to "status" ("{...,\"status\":\"QUOTED\""), jobs.json_tail the members after the photo
 * arrays (",\"tipAmount\":...,\"updatedAt\":\"...\""), both written by the jobs domain in the
 * transaction that changes the job. At read only the signed photo URLs (nothing for an empty
 * array) and the caller's own members are added. A row whose parts are NULL (written by
 * something else, or not yet) is rendered from its columns instead, with the same result. */
#ifndef DOMAIN_SHAPES_H
#define DOMAIN_SHAPES_H
#include "core/jw.h"
#include "db/db.h"
#include "http/rowjson.h"
#include <stdbool.h>

/* The Quote JSON of a `SELECT quotes.*` row. */
extern const hs_rj_field SHAPE_QUOTE[];
/* The members every view of a customer's users row has `{ id, email, name, address, zip,
 * lat, lng, isPremium, premiumSince, createdAt }` (the profile, the administrator's and staff's
 * views add their own, including this table with RJ_INCLUDE), and those of a providers row in
 * the lists of the administrator and staff `{ id, name, email, companyName, services,
 * serviceZips, isPremium, createdAt }`. */
extern const hs_rj_field SHAPE_CUSTOMER[], SHAPE_PROVIDER_ROW[];
/* A provider as a customer choosing between quotes sees it `{ name, phone, companyName,
 * companyUrl, insuranceInfo, logoUrl }` (also members of the provider's own profile). */
extern const hs_rj_field SHAPE_PROVIDER_CONTACT[];

/* A result holding jobs rows, bound once for the Job JSON. It needs id, json_head, json_tail
 * and the three photo columns; with every column of the jobs table (`SELECT jobs.*`) it can
 * also render rows whose stored parts are missing. Used by one thread. */
typedef struct shape_jobs shape_jobs;
shape_jobs *shape_jobs_bind(arena *a, const db_res *r);
/* True when row has no stored parts (json_head is NULL). */
bool shape_job_missing(const shape_jobs *b, const db_res *r, int row);
/* Writes the Job JSON of row and leaves the object open: the caller adds its own members and
 * closes it with jw_obj_end. False, writing nothing, when the stored parts are missing and the
 * result lacks the columns to render them. */
bool shape_job_open(jw *w, shape_jobs *b, const db_res *r, int row);
/* The stored parts of a full jobs row, rendered now (arena text). */
void shape_job_render(arena *a, const db_res *r, int row, const char **head, const char **tail);
/* The same for the row as it will be once the n listed columns hold the listed values (text
 * cells, NULL for SQL NULL): the JSON of a change, rendered before the UPDATE that makes it. */
void shape_job_render_with(arena *a, const db_res *r, int row, const char *const *columns, const char *const *values,
                           int n, const char **head, const char **tail);

#endif

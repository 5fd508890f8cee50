/* Handlers of the staff domain and the JSON shapes they share. Internal to the domain. */
#ifndef DOMAIN_STAFF_STAFF_API_H
#define DOMAIN_STAFF_STAFF_API_H
#include "db/db.h"
#include "http/http.h"

/* staff_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route staff_routes[];

/* staff_api.c: accounts */
err_t api_staff_login(hs_req *req);
err_t api_staff_me(hs_req *req);
err_t api_staff_logout(hs_req *req);
err_t api_staff_list(hs_req *req);
err_t api_staff_create(hs_req *req);
err_t api_staff_impersonate_staff(hs_req *req);
/* staff_lookup.c */
err_t api_staff_customers(hs_req *req);
err_t api_staff_customer(hs_req *req);
err_t api_staff_providers(hs_req *req);
err_t api_staff_provider(hs_req *req);
/* staff_elevation.c */
err_t api_staff_elevation_create(hs_req *req);
err_t api_staff_elevation_approve(hs_req *req);
err_t api_staff_elevation_deny(hs_req *req);
err_t api_staff_elevation_list(hs_req *req);
err_t api_staff_impersonate(hs_req *req);
err_t api_staff_elevation_deactivate(hs_req *req);
err_t api_staff_audit_sessions(hs_req *req);
err_t api_staff_audit_me(hs_req *req);
err_t api_admin_elevations(hs_req *req);
err_t api_admin_elevation_approve(hs_req *req);
err_t api_admin_elevation_deny(hs_req *req);
/* staff_reports.c */
err_t api_staff_reports(hs_req *req);
err_t api_staff_report_resolve(hs_req *req);

/* staff_hooks.c: the HTTP hooks (impersonated requests' audit records). */
extern const hs_hooks staff_hooks;

/* POST /staff/create's body: name, email, password, role (also what `marketplace staff save`
 * checks). */
extern const hs_schema staff_create_schema;
/* { email }, checked as POST /staff/create checks it (`marketplace staff disable|enable`). */
extern const hs_schema staff_email_schema;

/* A staff member `{ id, name, email, role, createdAt }` from a staff row. New reference. */
json_t *staff_json(const db_res *r, int row);
/* An ElevationRequest from a row of the staff store's elevation queries. New reference. */
json_t *elevation_json(const db_res *r, int row);
/* Deactivates ACTIVE elevations whose 15 minutes are over (done before every read that lists
 * elevations). Failures are logged: the read goes on. */
void staff_expire_elevations(void);

#endif

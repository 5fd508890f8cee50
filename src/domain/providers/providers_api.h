/* Handlers of the providers domain, referenced by its route table. */
#ifndef DOMAIN_PROVIDERS_API_H
#define DOMAIN_PROVIDERS_API_H
#include "domain/domain.h"
#include "http/http.h"
#include "http/rowjson.h"

/* providers_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route providers_routes[];

err_t api_providers_me(hs_req *req);
err_t api_providers_update_me(hs_req *req);
err_t api_providers_upload_logo(hs_req *req);
err_t api_providers_add_headshot(hs_req *req);
err_t api_providers_delete_headshot(hs_req *req);
err_t api_providers_upload_id_documents(hs_req *req);
err_t api_providers_upload_insurance(hs_req *req);
/* providers_work.c */
err_t api_providers_jobs(hs_req *req);
err_t api_providers_schedule(hs_req *req);
err_t api_providers_availability(hs_req *req);
err_t api_providers_set_availability(hs_req *req);
err_t api_providers_preferred_pro(hs_req *req);
err_t api_providers_preferred_pro_cancel(hs_req *req);
/* providers_work.c: hourly, the Preferred Pro memberships whose end came end */
bool providers_end_memberships(json_t *payload, char err[256]);
/* providers_insights.c */
err_t api_providers_insights(hs_req *req);
err_t api_providers_premium_insights(hs_req *req);
/* providers_profile.c */
err_t api_providers_public_profile(hs_req *req);
/* bundles.c */
err_t api_providers_bundles(hs_req *req);
err_t api_providers_accept_bundle(hs_req *req);

/* providers_recognition.c: document recognition (heavy work) */
bool providers_check_licence(json_t *payload, char err[256]);
bool providers_check_insurance(json_t *payload, char err[256]);

/* providers_api.c: the export's account and devicePushToken of a provider (domain_def's
 * export_in) */
err_t providers_export_in(db_conn *c, const account_ref *who, account_export *x);

/* providers_profile.c: a review of the provider `{ id, rating, comment, service, createdAt }`
 * (a row of prov_store_reviews), which the public profile and the insights extend. */
extern const hs_rj_field PROV_REVIEW_JSON[];

#endif

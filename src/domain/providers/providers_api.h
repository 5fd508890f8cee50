/* Handlers of the providers domain, referenced by its route table. */
#ifndef DOMAIN_PROVIDERS_API_H
#define DOMAIN_PROVIDERS_API_H
#include "http/http.h"

err_t api_providers_me(hs_req *req);
err_t api_providers_update_me(hs_req *req);
err_t api_providers_upload_logo(hs_req *req);
err_t api_providers_add_headshot(hs_req *req);
err_t api_providers_delete_headshot(hs_req *req);
err_t api_providers_upload_id_documents(hs_req *req);
err_t api_providers_upload_insurance(hs_req *req);

#endif

/* Handlers of the users domain, referenced by its route table. */
#ifndef DOMAIN_USERS_API_H
#define DOMAIN_USERS_API_H
#include "http/http.h"

err_t api_users_me(hs_req *req);
err_t api_users_update_me(hs_req *req);
/* premium.c */
err_t api_users_favorites(hs_req *req);
err_t api_users_add_favorite(hs_req *req);
err_t api_users_remove_favorite(hs_req *req);
err_t api_users_pro_notes(hs_req *req);
err_t api_users_set_pro_note(hs_req *req);
err_t api_users_delete_pro_note(hs_req *req);
err_t api_users_spend_summary(hs_req *req);
err_t api_users_seasonal_alerts(hs_req *req);

#endif

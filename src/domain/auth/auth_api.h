/* Handlers of the auth domain, referenced by its route table. */
#ifndef DOMAIN_AUTH_API_H
#define DOMAIN_AUTH_API_H
#include "core/ids.h"
#include "domain/auth/auth_tokens_store.h"
#include "domain/domain.h"
#include "http/http.h"

/* auth_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route auth_routes[];

err_t api_auth_register(hs_req *req);
err_t api_auth_login(hs_req *req);
err_t api_auth_provider_register(hs_req *req);
err_t api_auth_provider_login(hs_req *req);
err_t api_auth_forgot_password(hs_req *req);
err_t api_auth_reset_password(hs_req *req);
err_t api_auth_change_password(hs_req *req);
err_t api_auth_change_email(hs_req *req);
err_t api_auth_confirm_email_page(hs_req *req);
err_t api_auth_confirm_email(hs_req *req);
err_t api_auth_cancel_email_change_page(hs_req *req);
err_t api_auth_cancel_email_change(hs_req *req);
err_t api_auth_logout(hs_req *req);
/* auth_pages.c: the server's own pages of the emailed links (when APP_URL is unset) */
err_t api_auth_app_reset_page(hs_req *req);
err_t api_auth_app_reset(hs_req *req);
err_t api_auth_app_confirm_page(hs_req *req);
err_t api_auth_app_confirm(hs_req *req);
/* Sets a new password with a reset token: ERR_OK with the account's role in *role, or *gone
 * when the token is unknown, used or expired (nothing answered yet); any other error has
 * failed the request (503 busy hashing, 500). */
err_t auth_reset_with(hs_req *req, const char *token, const char *password, const char **role, bool *gone);
/* *live: the reset token is known and unexpired (nothing changes). */
err_t auth_reset_live(hs_req *req, const char *token, bool *live);
err_t api_auth_logout_all(hs_req *req);
/* Hourly (auth.c): ended tokens past their expiry, lapsed email changes and their counts go. */
bool auth_prune(json_t *payload, char err[256]);
/* auth_tokens.c: the request hook that checks every token against the database, and the
 * start-up and shutdown of the checks it keeps. */
extern const hs_hooks auth_hooks;
void auth_tokens_init(void);
void auth_tokens_stop(void);
/* auth_tokens.c: POST /auth/refresh. */
err_t api_auth_refresh(hs_req *req);
/* auth_tokens.c: opens a session of the account id of role ("user" or "provider", its token
 * generation gen): *token a 7-day access token, *refresh its refresh token (arena strings). ERR_OK,
 * or the request has failed. */
err_t auth_open_session(hs_req *req, const char *role, const char *id, int64_t gen, const char **token,
                        const char **refresh);
/* A session made ready before its rows are written (a registration writes them with the account):
 * its row and first refresh token (store), the refresh token's text and the access token's jti. */
typedef struct session_new {
  char family[ID_LEN + 1], refresh[65], refresh_hash[65], access_id[ID_LEN + 1];
  session_row row;
  session_grant grant;
  int64_t now;
} session_new;
/* Makes session n of the account id of role (generation gen) ready; n must not move afterwards. */
void auth_session_prepare(session_new *n, const char *role, const char *id, int64_t gen);
/* Once n's rows are written: its access token in *token and its refresh token in *refresh (arena
 * strings). ERR_OK, or the request has failed. */
err_t auth_session_answer(hs_req *req, const session_new *n, const char **token, const char **refresh);

/* { password }: the rules of every account's password (auth_password_problem). */
extern const hs_schema auth_password_schema;

/* The export's pendingEmailChange (domain_def's export_parts): the live one, or null. */
extern const account_part AUTH_EXPORT_PARTS[];

#endif

/* The server's own pages of the emailed links, under /app (domain/links.h): where the links
 * lead when APP_URL is unset, so a fresh `make run` completes a password reset and an email
 * change in a browser. They are served whatever APP_URL says (an operator's app may send
 * people there too).
 *
 * Every answer is an HTML page, a refusal included: a link opened twice, a link cut short or a
 * password too short shows a page that says so, never an error body. The reset form is a plain
 * form POST (application/x-www-form-urlencoded) handled here, so the pages need no script; the
 * token travels in the form's body, not in the address the form posts to. */
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_api.h"
#include "domain/common.h"
#include "http/router.h"
#include <string.h>

/* The link's token (1 to 512 characters), read here rather than by a query schema so that a
 * link cut short answers a page; also set as the request's query for the handlers that read it
 * there. NULL when there is none. */
static const char *page_token(hs_req *req) {
  json_t *args = arena_json(&req->arena, json_object());
  hs_query_parse(req->query_string, args);
  const char *token = json_string_value(json_object_get(args, "token"));
  if (!token || !*token || strlen(token) > 512) return NULL;
  req->query = args;
  return token;
}

/* The page of a link without its token: 400. */
static err_t reply_incomplete(hs_req *req) {
  return common_reply_page_as(req, 400, "This link is incomplete",
                              "<p>The address lacks its token: open the link from the email as it is, or ask "
                              "for a new one in the app.</p>\n",
                              NULL);
}

/* The page of a reset link that can no longer act: 400. */
static err_t reply_reset_gone(hs_req *req) {
  return common_reply_page_as(req, 400, "This link is no longer valid",
                              "<p>This password reset link was used already, or it expired (a link lasts one "
                              "hour). Ask for a new one in the app: \"Forgot your password?\"</p>\n",
                              NULL);
}

/* The reset form for token, with problem (NULL: none) said above it: status 200 or 400. */
static err_t reply_reset_form(hs_req *req, const char *token, const char *problem) {
  const char *values[] = {problem ? problem : "", token};
  err_t e = common_reply_page(
      req, "Choose a new password",
      arena_printf(&req->arena,
                   "%s<form method=\"post\" action=\"reset-password\">\n"
                   "<input type=\"hidden\" name=\"token\" value=\"%%s\">\n"
                   "<label for=\"newPassword\">New password</label>\n"
                   "<input id=\"newPassword\" name=\"newPassword\" type=\"password\" autocomplete=\"new-password\" "
                   "minlength=\"8\" maxlength=\"72\" required aria-describedby=\"rules%s\"%s>\n"
                   "<p id=\"rules\"><small>8 to 72 characters. Every device signed in with the old password is "
                   "signed out.</small></p>\n"
                   "<button type=\"submit\">Set the new password</button>\n</form>\n",
                   problem ? "<p id=\"problem\" class=\"problem\" role=\"alert\">%s</p>\n" : "%s",
                   problem ? " problem" : "", problem ? " aria-invalid=\"true\" autofocus" : " autofocus"),
      values);
  if (e == ERR_OK && problem) req->status = 400;
  return e;
}

err_t api_auth_app_reset_page(hs_req *req) {
  const char *token = page_token(req);
  if (!token) return reply_incomplete(req);
  bool live;
  if (auth_reset_live(req, token, &live) != ERR_OK) return ERR_INTERNAL;
  return live ? reply_reset_form(req, token, NULL) : reply_reset_gone(req);
}

err_t api_auth_app_reset(hs_req *req) {
  json_t *form = arena_json(&req->arena, json_object());
  hs_query_parse(arena_strndup(&req->arena, req->raw_body, req->raw_len), form);
  const char *token = json_string_value(json_object_get(form, "token"));
  const char *password = json_string_value(json_object_get(form, "newPassword"));
  if (!token || !*token || strlen(token) > 512) return reply_incomplete(req);
  char msg[256];
  const char *problem = auth_password_problem(password ? password : "", msg);
  if (problem) /* "password: must be ..." */
    return reply_reset_form(req, token, arena_printf(&req->arena, "The new password %s.", strchr(problem, ' ') + 1));
  const char *role;
  bool gone;
  err_t e = auth_reset_with(req, token, password, &role, &gone);
  if (e != ERR_OK) return e;
  if (gone) return reply_reset_gone(req);
  return common_reply_page(req, "Your password was changed",
                           "<p>Log in with your new password. Every device that was signed in with the old one "
                           "was signed out.</p>\n",
                           NULL);
}

err_t api_auth_app_confirm_page(hs_req *req) {
  return page_token(req) ? api_auth_confirm_email_page(req) : reply_incomplete(req);
}

err_t api_auth_app_confirm(hs_req *req) {
  if (!page_token(req)) return reply_incomplete(req);
  err_t e = api_auth_confirm_email(req);
  if (e != ERR_CONFLICT) return e;
  req->err = ERR_OK, req->err_code = req->err_message = NULL; /* this page answers it instead */
  return common_reply_page_as(req, 409, "This address is taken",
                              "<p>Another account registered this address after the change was asked for, so your "
                              "account keeps its email address. Ask for the change again with another address.</p>\n",
                              NULL);
}

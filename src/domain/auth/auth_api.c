/* Handlers for /auth/... . Password hashing goes through the bounded pool (ext/password.h);
 * when it is full the route answers 503 with Retry-After at once. Login answers the same
 * 401 for an unknown email and a wrong password, after the same amount of hashing, and
 * counts both as failures for the login throttle (http/ratelimit.h: 429 past its limits).
 *
 * The owner's changes check the current password through the same throttle, so a stolen token
 * cannot be used to guess it. A password change moves the account's token generation on and
 * answers a token of the new one (in a new session); logout records the presented token's id as
 * ended until it would have expired and ends its session; logout-all moves the generation on.
 * Every login, registration and password change opens a session (auth_tokens.c). An email change is confirmed by a
 * link to the new address (a 256-bit token of which only the SHA-256 is kept, 24 hours). */
#include "domain/auth/auth_api.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_store.h"
#include "domain/auth/auth_tokens_store.h"
#include "domain/common.h"
#include "domain/links.h"
#include "ext/digest.h"
#include "ext/password.h"
#include "ext/queue.h"
#include "ext/token.h"
#include "http/ratelimit.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RESET_TTL_MS (60LL * 60 * 1000)
#define EMAIL_CHANGE_TTL_MS (24LL * 60 * 60 * 1000)

/* A client refused for load waits this long for its 503, so a flood that ignores Retry-After
 * cannot spin the server on cheap refusals. The server holds the answer without a thread
 * (hs_req.delay_ms). */
#define BUSY_DELAY_MS 200

/* Maps a hashing failure to the answer: 503 + Retry-After when the pool is saturated. */
static err_t hashing_failed(hs_req *req, pw_result r) {
  if (r == PW_BUSY) {
    req->delay_ms = BUSY_DELAY_MS;
    req->retry_after = 1;
    return hs_fail(req, ERR_UNAVAILABLE, "Server busy");
  }
  return hs_fail(req, ERR_INTERNAL, NULL);
}

/* {token, refreshToken, <key>: {id, email, name}}: a 7-day token and the refresh token of a
 * session, the account's (key). */
static err_t reply_tokens(hs_req *req, const char *key, const char *token, const char *refresh, const char *id,
                          const char *email, const char *name) {
  return hs_ok_pack(req, "{s:s,s:s,s:{s:s,s:s,s:s}}", "token", token, "refreshToken", refresh, key, "id", id, "email",
                    email, "name", name);
}

/* reply_tokens of a new session of role's account id (generation gen). */
static err_t reply_session(hs_req *req, const char *key, const char *role, const char *id, const char *email,
                           const char *name, int64_t gen) {
  const char *token, *refresh;
  err_t e = auth_open_session(req, role, id, gen, &token, &refresh);
  return e ? e : reply_tokens(req, key, token, refresh, id, email, name);
}

/* The one answer to each outcome of the auth store but AUTH_DONE (AUTH_TOO_OFTEN: the caller set
 * req->retry_after). */
static err_t auth_fail(hs_req *req, auth_outcome out);

/* A registration up to its store: the email is free for kind, the password is hashed into hash
 * and the account has a new id. ERR_OK, or the request has failed. */
static err_t registration(hs_req *req, account_kind kind, char hash[128], char id[ID_LEN + 1]) {
  bool taken;
  account existing;
  if (auth_store_find(&req->arena, kind, hs_body_str(req, "email"), &existing, &taken) != ERR_OK) return ERR_INTERNAL;
  if (taken) return auth_fail(req, AUTH_EMAIL_TAKEN);
  pw_result pr = password_hash(hs_body_str(req, "password"), hash);
  if (pr != PW_OK) return hashing_failed(req, pr);
  id_new(id);
  return ERR_OK;
}

/* A registration after its store (out), which wrote the new account's (role) session n. */
static err_t registered(hs_req *req, auth_outcome out, const char *role, const session_new *n) {
  if (out != AUTH_DONE) return auth_fail(req, out);
  const char *token, *refresh;
  err_t e = auth_session_answer(req, n, &token, &refresh);
  return e ? e
           : reply_tokens(req, role, token, refresh, n->row.account_id, hs_body_str(req, "email"),
                          hs_body_str(req, "name"));
}

/* A registration of kind: the account and its first session are written in one transaction. */
static err_t register_account(hs_req *req, account_kind kind) {
  char hash[128], id[ID_LEN + 1];
  err_t e = registration(req, kind, hash, id);
  if (e != ERR_OK) return e;
  const char *role = kind == ACCOUNT_USER ? "user" : "provider", *email = hs_body_str(req, "email"),
             *name = hs_body_str(req, "name");
  session_new n;
  auth_session_prepare(&n, role, id, 0);
  auth_outcome out = kind == ACCOUNT_USER
                         ? auth_store_insert_user(id, email, hash, name, hs_body_str(req, "address"),
                                                  hs_body_str(req, "zip"), &n.row, &n.grant)
                         : auth_store_insert_provider(id, email, hash, name, hs_body_str(req, "phone"),
                                                      json_object_get(req->body, "services"),
                                                      json_object_get(req->body, "serviceZips"), &n.row, &n.grant);
  return registered(req, out, role, &n);
}

err_t api_auth_register(hs_req *req) { return register_account(req, ACCOUNT_USER); }
err_t api_auth_provider_register(hs_req *req) { return register_account(req, ACCOUNT_PROVIDER); }

static err_t login(hs_req *req, account_kind kind) {
  if (password_pool_full()) return hashing_failed(req, PW_BUSY); /* before touching the database */
  const char *email = hs_body_str(req, "email");
  bool found;
  account acc = {0};
  if (auth_store_find(&req->arena, kind, email, &acc, &found) != ERR_OK) return ERR_INTERNAL;
  err_t e = auth_check_login(req, kind == ACCOUNT_USER ? LOGIN_USER : LOGIN_PROVIDER, email,
                             hs_body_str(req, "password"), found ? acc.password_hash : NULL);
  if (e != ERR_OK) return e;
  const char *role = kind == ACCOUNT_USER ? "user" : "provider";
  return reply_session(req, role, role, acc.id, acc.email, acc.name, acc.token_gen);
}

err_t api_auth_login(hs_req *req) { return login(req, ACCOUNT_USER); }
err_t api_auth_provider_login(hs_req *req) { return login(req, ACCOUNT_PROVIDER); }

err_t api_auth_forgot_password(hs_req *req) {
  const char *email = hs_body_str(req, "email"), *role = hs_body_str(req, "role"), *redirect;
  bool found;
  account acc;
  account_kind kind = !strcmp(role, "provider") ? ACCOUNT_PROVIDER : ACCOUNT_USER;
  err_t e = links_redirect(req, &redirect);
  if (e != ERR_OK) return e;
  if (auth_store_find(&req->arena, kind, email, &acc, &found) != ERR_OK) return ERR_INTERNAL;
  if (found) {
    char token[65], token_hash[65];
    secret_new_hex(token, token_hash);
    const char *link =
        links_app(&req->arena, redirect, "/reset-password", arena_printf(&req->arena, "token=%s", token));
    char *body = arena_printf(&req->arena,
                              "Hello %s,\n\nWe received a request to reset your password. Open this link within one "
                              "hour to choose a new one:\n\n%s\n\nIf you did not ask for "
                              "this, you can ignore this email; your password stays as it is.\n",
                              acc.name, link);
    e = auth_store_put_reset(email, role, acc.id, token_hash, clock_now_ms() + RESET_TTL_MS, "Reset your password",
                             body);
    if (e != ERR_OK) return e;
  }
  return hs_ok(
      req, json_pack("{s:s}", "message", "If an account exists for that email, a password reset link has been sent."));
}

err_t auth_reset_live(hs_req *req, const char *token, bool *live) {
  char token_hash[65];
  const char *role;
  sha256_hex(token, strlen(token), token_hash);
  return auth_store_find_reset(&req->arena, token_hash, &role, live) == ERR_OK ? ERR_OK : ERR_INTERNAL;
}

err_t auth_reset_with(hs_req *req, const char *token, const char *password, const char **role, bool *gone) {
  char token_hash[65];
  sha256_hex(token, strlen(token), token_hash);
  bool found;
  *gone = false;
  if (auth_store_find_reset(&req->arena, token_hash, role, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return *gone = true, ERR_OK;
  char hash[128];
  pw_result pr = password_hash(password, hash);
  if (pr != PW_OK) return hashing_failed(req, pr);
  const char *email;
  auth_outcome out = auth_store_use_reset(&req->arena, token_hash, hash, role, &email);
  if (out == AUTH_RESET_GONE) return *gone = true, ERR_OK;
  if (out != AUTH_DONE) return auth_fail(req, out);
  /* the mailbox's owner chose a new password: the failures counted against the old one no
   * longer hold the account */
  bool was_held;
  if (auth_login_unlock(!strcmp(*role, "provider") ? LOGIN_PROVIDER : LOGIN_USER, email, &was_held) != ERR_OK)
    log_msg(LOG_WARN, "password reset: the account's failed logins could not be forgotten");
  return ERR_OK;
}

err_t api_auth_reset_password(hs_req *req) {
  const char *role;
  bool gone;
  err_t e = auth_reset_with(req, hs_body_str(req, "token"), hs_body_str(req, "newPassword"), &role, &gone);
  if (e != ERR_OK) return e;
  if (gone) return auth_fail(req, AUTH_RESET_GONE);
  return hs_ok_pack(req, "{s:s,s:s}", "message", "Password has been reset", "role", role);
}

/* ---- the owner's account ---- */

static account_kind kind_of(const hs_req *req) {
  return req->auth.role_bit == ROLE_PROVIDER ? ACCOUNT_PROVIDER : ACCOUNT_USER;
}

err_t auth_check_own_password(hs_req *req, const char *password, account_card *out) {
  err_t e = auth_refuse_when_busy(req);
  if (e != ERR_OK) return e;
  account acc;
  bool found;
  if (auth_store_get(&req->arena, kind_of(req), req->auth.id, &acc, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return hs_fail(req, ERR_UNAUTHORIZED, NULL);
  e = auth_check_login(req, kind_of(req) == ACCOUNT_USER ? LOGIN_USER : LOGIN_PROVIDER, acc.email, password,
                       acc.password_hash);
  if (e == ERR_OK) *out = (account_card){acc.id, acc.email, acc.name, acc.token_gen};
  return e;
}

err_t api_auth_change_password(hs_req *req) {
  account_card acc;
  err_t e = auth_check_own_password(req, hs_body_str(req, "currentPassword"), &acc);
  if (e != ERR_OK) return e;
  char hash[128];
  if ((e = auth_hash_password(req, hs_body_str(req, "newPassword"), hash)) != ERR_OK) return e;
  const char *body = arena_printf(&req->arena,
                                  "Hello %s,\n\nThe password of your account was changed, and every device signed "
                                  "in with the old one was signed out.\n\nIf you did not make this change, reset "
                                  "your password at once and contact support.\n",
                                  acc.name);
  int64_t gen;
  e = auth_store_change_password(kind_of(req), acc.id, hash, "Your password was changed", body, &gen);
  if (e == ERR_NOT_FOUND) return hs_fail(req, ERR_UNAUTHORIZED, NULL);
  if (e != ERR_OK) return e;
  /* the caller signs in again with the new password: a new session */
  const char *token, *refresh;
  if ((e = auth_open_session(req, req->auth.role, acc.id, gen, &token, &refresh)) != ERR_OK) return e;
  return hs_ok_pack(req, "{s:s,s:s}", "token", token, "refreshToken", refresh);
}

/* The address as the current owner's notice shows it: its first character, then ***, then its
 * domain ("a***@example.com"). */
static const char *masked(arena *a, const char *email) {
  const char *at = strchr(email, '@');
  return arena_printf(a, "%.1s***%s", email, at ? at : "");
}

err_t api_auth_change_email(hs_req *req) {
  account_card acc;
  const char *redirect;
  err_t e = links_redirect(req, &redirect);
  if (e == ERR_OK) e = auth_check_own_password(req, hs_body_str(req, "currentPassword"), &acc);
  if (e != ERR_OK) return e;
  const char *email = hs_body_str(req, "email");
  bool taken;
  account other;
  if (auth_store_find(&req->arena, kind_of(req), email, &other, &taken) != ERR_OK) return ERR_INTERNAL;
  if (taken) return auth_fail(req, AUTH_EMAIL_TAKEN);
  char token[65], token_hash[65], cancel[65], cancel_hash[65];
  secret_new_hex(token, token_hash);
  secret_new_hex(cancel, cancel_hash);
  /* the new address has not said the account is its own: nothing the caller wrote goes there */
  email_change_ask ask = {
      .kind = kind_of(req),
      .id = acc.id,
      .email = email,
      .token_hash = token_hash,
      .cancel_hash = cancel_hash,
      .gen = acc.token_gen,
      .expires_at = clock_now_ms() + EMAIL_CHANGE_TTL_MS,
      .to_new_subject = "Confirm your new email address",
      .to_new_body = arena_printf(
          &req->arena,
          "Hello,\n\nSomeone asked to make this address the email address of an account "
          "of ours. If it was you, open this link within 24 hours and confirm:\n\n"
          "%s\n\nIf it was not you, ignore this email: nothing changes.\n",
          links_app(&req->arena, redirect, "/confirm-email", arena_printf(&req->arena, "token=%s", token))),
      .to_old = acc.email,
      .to_old_subject = arena_printf(&req->arena, "An email change to %s was requested", masked(&req->arena, email)),
      .to_old_body = arena_printf(&req->arena,
                                  "Hello,\n\nAn email change to %s was requested for your account. It takes effect "
                                  "only once confirmed from that address, within 24 hours.\n\nIf you did not ask "
                                  "for it, cancel it, then change your password.\n\nCancel the change:\n"
                                  "%s/auth/cancel-email-change?token=%s\n\nChanging your password, resetting it or "
                                  "signing out everywhere also ends it.\n",
                                  masked(&req->arena, email), CFG.public_url, cancel)};
  int retry_after = 0;
  auth_outcome out = auth_store_put_email_change(&ask, &retry_after);
  if (out == AUTH_TOO_OFTEN) req->retry_after = retry_after;
  if (out != AUTH_DONE) return auth_fail(req, out);
  return hs_ok(
      req, json_pack("{s:s}", "message",
                     arena_printf(&req->arena,
                                  "A confirmation link was sent to %s; the email changes when it is opened.", email)));
}

/* The page of a link that can no longer act (used, expired, cancelled, or ended with the
 * account's sign-ins): 400. */
static err_t reply_link_gone(hs_req *req, const char *what) {
  const char *values[] = {what};
  return common_reply_page_as(req, 400, "This link is no longer valid",
                              "<p>%s It was used already, it expired, or it was ended: changing the account's "
                              "password, resetting it or signing out everywhere ends a pending email change.</p>\n",
                              values);
}

static err_t auth_fail(hs_req *req, auth_outcome out) {
  switch (out) {
  case AUTH_EMAIL_TAKEN: return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_EMAIL_TAKEN, "Email already registered");
  case AUTH_RESET_GONE: return hs_fail(req, ERR_BAD_REQUEST, "Invalid or expired reset token");
  case AUTH_CHANGE_GONE:
    return reply_link_gone(req, "This email change cannot be confirmed: if you confirmed it already, your account "
                                "uses the new address.");
  case AUTH_TOO_OFTEN: return hs_fail(req, ERR_RATE_LIMITED, NULL);
  case AUTH_DONE:
  case AUTH_FAILED: break;
  }
  return ERR_INTERNAL;
}

/* The ?token= of an emailed link, and its SHA-256 (what is stored) in hash. */
static const char *link_token_hash(hs_req *req, char hash[65]) {
  const char *token = hs_query_str(req, "token");
  sha256_hex(token, strlen(token), hash);
  return token;
}

/* GET /auth/confirm-email: a page whose button confirms (a GET changes nothing, so a mail
 * scanner opening the link confirms nothing). */
err_t api_auth_confirm_email_page(hs_req *req) {
  char token_hash[65];
  const char *token = link_token_hash(req, token_hash), *email;
  bool found;
  if (auth_store_find_email_change(&req->arena, token_hash, &email, &found) != ERR_OK) return ERR_INTERNAL;
  if (!found) return auth_fail(req, AUTH_CHANGE_GONE);
  const char *values[] = {email, token};
  return common_reply_page(req, "Confirm your new email address",
                           "<p>Make <strong>%s</strong> the email address of your account?</p>\n"
                           "<form method=\"post\" action=\"confirm-email?token=%s\">"
                           "<button type=\"submit\">Confirm</button></form>\n",
                           values);
}

/* POST /auth/confirm-email: the page's button. */
err_t api_auth_confirm_email(hs_req *req) {
  char token_hash[65];
  const char *email = NULL;
  link_token_hash(req, token_hash);
  auth_outcome out = auth_store_use_email_change(&req->arena, token_hash, &email);
  if (out != AUTH_DONE) return auth_fail(req, out);
  const char *values[] = {email};
  return common_reply_page(req, "Email address changed",
                           "<p>Your account's email address is now <strong>%s</strong>. Log in with it from now "
                           "on.</p>\n",
                           values);
}

/* GET /auth/cancel-email-change: the current address's page, whose button cancels. */
err_t api_auth_cancel_email_change_page(hs_req *req) {
  const char *values[] = {hs_query_str(req, "token")};
  return common_reply_page(req, "Cancel the email change",
                           "<p>The email address of your account stays as it is. Change your password too if you "
                           "did not ask for the change.</p>\n<form method=\"post\" action=\"cancel-email-change?"
                           "token=%s\"><button type=\"submit\">Cancel the change</button></form>\n",
                           values);
}

/* POST /auth/cancel-email-change: the page's button. */
err_t api_auth_cancel_email_change(hs_req *req) {
  char cancel_hash[65];
  const char *email;
  bool cancelled;
  link_token_hash(req, cancel_hash);
  if (auth_store_cancel_email_change(&req->arena, cancel_hash, &email, &cancelled) != ERR_OK) return ERR_INTERNAL;
  if (!cancelled) return reply_link_gone(req, "There is no email change to cancel.");
  const char *values[] = {masked(&req->arena, email)};
  return common_reply_page(req, "Email change cancelled",
                           "<p>The change to %s was cancelled: your account keeps its email address.</p>\n", values);
}

err_t auth_end_caller_token(hs_req *req) {
  return auth_store_logout(req->auth.token_id, req->auth.token_exp * 1000, req->auth.session_id, req->auth.role,
                           req->auth.id);
}

err_t api_auth_logout(hs_req *req) {
  err_t e = auth_end_caller_token(req);
  return e ? e : hs_ok_pack(req, "{s:b}", "ok", 1);
}

err_t api_auth_logout_all(hs_req *req) {
  err_t e = auth_store_end_all(kind_of(req), req->auth.id);
  return e ? e : hs_ok_pack(req, "{s:b}", "ok", 1);
}

bool auth_prune(json_t *payload, char err[256]) {
  (void)payload;
  if (auth_store_prune(clock_now_ms()) == ERR_OK && auth_store_prune_ended(clock_now_ms()) == ERR_OK) return true;
  snprintf(err, 256, "cannot delete ended tokens and expired email changes");
  return false;
}

const char *auth_password_problem(const char *password, char msg[256]) {
  json_t *input = json_pack("{s:s?}", "password", password);
  json_t *checked = hs_validate(&auth_password_schema, input, false, msg);
  json_decref(input);
  json_decref(checked);
  return checked ? NULL : msg;
}

err_t auth_refuse_when_busy(hs_req *req) { return password_pool_full() ? hashing_failed(req, PW_BUSY) : ERR_OK; }

/* The login throttle's name of an account: its kind and its email ("staff:jo@example.com"). */
static const char *const LOGIN_KINDS[] = {
    [LOGIN_USER] = "user", [LOGIN_PROVIDER] = "provider", [LOGIN_STAFF] = "staff", [LOGIN_ADMIN] = "admin"};

static hs_login_kind throttle_kind(login_kind kind) {
  return kind == LOGIN_STAFF || kind == LOGIN_ADMIN ? HS_LOGIN_PRIVILEGED : HS_LOGIN_ACCOUNT;
}

err_t auth_check_login(hs_req *req, login_kind kind, const char *email, const char *password, const char *hash) {
  hs_login_attempt attempt;
  err_t e =
      hs_login_begin(req, arena_printf(&req->arena, "%s:%s", LOGIN_KINDS[kind], email), throttle_kind(kind), &attempt);
  if (e != ERR_OK) return e;
  pw_result pr = password_verify(password, hash);
  hs_login_end(&attempt, pr == PW_MISMATCH ? HS_LOGIN_WRONG : pr == PW_OK ? HS_LOGIN_RIGHT : HS_LOGIN_UNCHECKED);
  if (pr == PW_MISMATCH)
    return hs_fail_code(req, ERR_UNAUTHORIZED, ERR_CODE_INVALID_CREDENTIALS, "Invalid credentials");
  return pr == PW_OK ? ERR_OK : hashing_failed(req, pr);
}

err_t auth_login_unlock(login_kind kind, const char *email, bool *was_locked) {
  char name[320];
  snprintf(name, sizeof name, "%s:%s", LOGIN_KINDS[kind], email);
  return hs_login_unlock(name, throttle_kind(kind), was_locked);
}

err_t auth_hash_password(hs_req *req, const char *password, char out[128]) {
  pw_result pr = password_hash(password, out);
  return pr == PW_OK ? ERR_OK : hashing_failed(req, pr);
}

err_t auth_account_get(arena *a, const char *role, const char *id, account_card *out) {
  account acc;
  bool found;
  if (strcmp(role, "user") && strcmp(role, "provider")) return ERR_NOT_FOUND;
  if (auth_store_get(a, !strcmp(role, "user") ? ACCOUNT_USER : ACCOUNT_PROVIDER, id, &acc, &found) != ERR_OK)
    return ERR_INTERNAL;
  if (!found) return ERR_NOT_FOUND;
  *out = (account_card){acc.id, acc.email, acc.name, acc.token_gen};
  return ERR_OK;
}

/* email lowercased into out (256 bytes); false when it does not fit. */
static bool lowercase(const char *email, char out[256]) {
  size_t n = strlen(email);
  if (n >= 256) return false;
  for (size_t i = 0; i <= n; i++) out[i] = (char)tolower((unsigned char)email[i]);
  return true;
}

bool auth_admin_upsert(const char *email, const char *password) {
  char hash[128], lower[256];
  if (!lowercase(email, lower) || !password_hash_now(password, CFG.bcrypt_cost, hash)) return false;
  return auth_store_upsert_admin(lower, hash) == ERR_OK;
}

bool auth_admin_create_absent(const char *email, const char *password, bool *created) {
  char hash[128], lower[256];
  bool exists;
  *created = false;
  if (!lowercase(email, lower) || auth_store_admin_exists(lower, &exists) != ERR_OK) return false;
  if (exists) return true;
  if (!password_hash_now(password, CFG.bcrypt_cost, hash)) return false;
  return auth_store_insert_admin(lower, hash, created) == ERR_OK;
}

err_t auth_admin_exists(const char *email, bool *exists) { return auth_store_admin_exists(email, exists); }

/* ---- the account's part (domain/domain.h) ---- */

static const hs_rj_field EMAIL_CHANGE[] = {{"email", "email", RJ_STR}, {"expiresAt", "expires_at", RJ_ISO}, {0}};

const account_part AUTH_EXPORT_PARTS[] = {{"pendingEmailChange", AUTH_EXPORT_SQL, EMAIL_CHANGE, .one = true}, {0}};

/* Links that lead somewhere: the addresses that emails and the payment processor's onboarding
 * send people to.
 *
 * Each flow's link is an APP_URL path with its parameters ({APP_URL}/reset-password?token=...,
 * docs/decisions.md "Links"); without APP_URL the server serves those pages itself under
 * {PUBLIC_URL}/app. A request that causes such a link may name its own address instead,
 * `redirectUrl`, so an app receives the link as a deep link: it is allowed when its origin is one
 * of APP_REDIRECT_URLS (exactly: scheme, host and port) or its scheme is a custom scheme listed
 * there ("myapp://"); anything else answers 400 `redirectUrl: not an allowed address` before
 * the request changes or sends anything. */
#ifndef DOMAIN_LINKS_H
#define DOMAIN_LINKS_H
#include "http/http.h"
#include <stdbool.h>

#define LINKS_REFUSED "not an allowed address"
/* The optional body field `redirectUrl` (1 to 2048 characters; anything else, or an address
 * APP_REDIRECT_URLS does not allow, answers the one message). */
#define LINKS_REDIRECT_FIELD                                                                                           \
  { "redirectUrl", F_STRING, 0, LEN(1, 2048), .message = LINKS_REFUSED }

/* True when url may receive a link: a web address whose origin is listed in APP_REDIRECT_URLS,
 * or an address of a listed custom scheme; never one with spaces, controls, non-ASCII bytes or
 * user information. */
bool links_allowed(const char *url);
/* The request body's redirectUrl into *out (NULL when there is none): ERR_OK; an address
 * links_allowed refuses fails the request (400 validation_failed, field redirectUrl). */
err_t links_redirect(hs_req *req, const char **out);
/* The link of a flow, in the arena: redirect when not NULL, else CFG.app_url followed by path
 * ("/reset-password"), with params ("token=ab12", already encoded; NULL: none) added to its
 * query, before any fragment. */
const char *links_app(arena *a, const char *redirect, const char *path, const char *params);

#endif

/* Access tokens: JWT HS256 through libjwt, keyed by CFG.jwt_secret.
 *
 * Claims: id, role, jti (the token's own id, a cuid), iat, exp (seconds), plus type "staff" for
 * staff tokens, elevationId for staff impersonation tokens, sid for a customer's or provider's
 * session (the login it belongs to: its refresh-token family, which the access tokens that the
 * login and its refreshes issue share), and gen, the account's token
 * generation when it is not 0: the account moves it on (a password reset or change, logout-all,
 * a staff member's role or password change, disabling them) and the database check then
 * refuses every token issued before, whatever the second it was issued in. Verification accepts
 * only HS256 with a valid signature and an exp after the service clock; "none", any other
 * algorithm, tampered and expired tokens are refused. Thread-safe. */
#ifndef EXT_TOKEN_H
#define EXT_TOKEN_H
#include <stdbool.h>
#include <stdint.h>

#define TOKEN_TTL_ACCOUNT (7LL * 24 * 3600) /* customer, provider */
#define TOKEN_TTL_ADMIN (24LL * 3600)
#define TOKEN_TTL_STAFF (12LL * 3600)
#define TOKEN_TTL_STAFF_IMPERSONATION (15LL * 60)
#define TOKEN_TTL_ADMIN_IMPERSONATION (2LL * 3600)

typedef struct token_claims {
  char id[64];
  char role[32];
  bool is_staff;         /* type == "staff" */
  char elevation_id[64]; /* empty when absent */
  int64_t iat, exp;      /* seconds */
  int64_t gen;           /* the account's token generation when issued (0 when absent) */
  char session_id[64];   /* its sid claim: the session (login) it belongs to; empty when absent */
  /* The token's id: its jti claim, or for a token issued before tokens had one "sig-" and the
   * hex of the first 16 bytes of its signature (unique to it as well). What logout records. */
  char token_id[72];
} token_claims;

/* Signs a token for claims (a fresh jti; iat and exp are set from the clock and ttl_seconds;
 * gen 0 is left out); returns a heap string for free(), NULL on failure. */
char *token_issue(const char *id, const char *role, bool is_staff, const char *elevation_id, int64_t gen,
                  int64_t ttl_seconds);
/* token_issue for a customer's or provider's session: the token also carries sid session_id,
 * and its jti is jti (the caller made it, id_new, to record it before the token is handed out). */
char *token_issue_session(const char *id, const char *role, int64_t gen, int64_t ttl_seconds, const char *session_id,
                          const char *jti);
/* Verifies token; fills *out and returns true only when it is valid now. */
bool token_verify(const char *token, token_claims *out);

#endif

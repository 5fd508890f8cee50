/* Accounts and credentials: registration and login of customers and providers, password
 * reset, the owner's password and email changes, logout (one token, or every token of the
 * account), administrator accounts (CLI and bootstrap), and the check of every token a request
 * carries (customer, provider, staff, administrator, impersonation) against the database. */
#ifndef DOMAIN_AUTH_H
#define DOMAIN_AUTH_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/http.h"
#include <stdbool.h>

extern const domain_def auth_domain;

/* An impersonation token is refused once its elevation was activated this long ago; the staff
 * domain lapses an ACTIVE elevation at that age. */
#define ELEVATION_TTL_MS (15LL * 60 * 1000)

/* Creates the administrator or, when the email exists, sets its password. Hashes on the
 * calling thread. False on failure (logged). */
bool auth_admin_upsert(const char *email, const char *password);
/* Creates the administrator only when the email has none (*created tells), never changing an
 * existing one's password; hashes (on the calling thread) only then. False on failure. */
bool auth_admin_create_absent(const char *email, const char *password, bool *created);
/* Whether an administrator has email (lowercase). ERR_INTERNAL when the database refused. */
err_t auth_admin_exists(const char *email, bool *exists);
/* NULL when password obeys the rules of every account's password (8 to 72 characters, at most
 * 72 bytes: bcrypt reads no more), else the reason ("password: must be ..."). */
const char *auth_password_problem(const char *password, char msg[256]);

/* Insert a customer (a provider, with its services and ZIPs, arrays of strings) on c inside
 * the caller's transaction (registration; the GODMODE generator inserts many at once).
 * DB_CONSTRAINT when the email is taken. */
db_rc auth_insert_user_in(db_conn *c, const char *id, const char *email, const char *hash, const char *name,
                          const char *address, const char *zip);
db_rc auth_insert_provider_in(db_conn *c, const char *id, const char *email, const char *hash, const char *name,
                              const char *phone, json_t *services, json_t *zips);
/* How a provider's rows of services and ZIPs follow its registration: write(c, id, services,
 * zips, now) inside the registering transaction. The providers domain owns those tables and
 * registers the writer at start-up (no provider registers before). */
typedef db_rc (*auth_lists_writer)(db_conn *c, const char *provider_id, json_t *services, json_t *zips, int64_t now);
void auth_follow_provider_lists(auth_lists_writer write);

/* A customer (role "user") or provider account: strings in arena memory; token_gen goes into
 * every token issued for it (ext/token.h). */
typedef struct account_card {
  const char *id, *email, *name;
  int64_t token_gen;
} account_card;
/* Looks up account id of role; ERR_NOT_FOUND when there is none (or role is neither, or the
 * account was deleted by its owner). */
err_t auth_account_get(arena *a, const char *role, const char *id, account_card *out);

/* Whose password a check is for: each kind is its own set of accounts for the login throttle,
 * so a customer and a provider with one email are two accounts. Staff members and
 * administrators are counted over an hour and locked after 20 failures (http/ratelimit.h). */
typedef enum login_kind { LOGIN_USER, LOGIN_PROVIDER, LOGIN_STAFF, LOGIN_ADMIN } login_kind;

/* Password work for every login (customers, providers, staff, administrators) and for account
 * creation elsewhere, on the bounded hashing pool. Each returns ERR_OK, or fails the request
 * and returns its error:
 * - auth_refuse_when_busy: 503 Server busy (Retry-After, held 200 ms) when the pool is full;
 *   call it first, before touching the database.
 * - auth_check_login: every password check goes through it. The login throttle for the account
 *   (kind and email) and the client (429 with Retry-After while throttled, http/ratelimit.h)
 *   counts the attempt before the password is hashed, then the password is checked against
 *   hash: 401 Invalid credentials on a mismatch, which stays counted as a failure. A NULL hash
 *   (unknown account) is checked against a dummy hash of the same cost, so both failures take
 *   as long and count alike.
 * - auth_hash_password: the bcrypt hash into out (128 bytes). */
err_t auth_refuse_when_busy(hs_req *req);
err_t auth_check_login(hs_req *req, login_kind kind, const char *email, const char *password, const char *hash);
err_t auth_hash_password(hs_req *req, const char *password, char out[128]);
/* The caller's own password, for the routes that change or delete its account (a customer or
 * provider token): 503 Server busy when the hashing pool is full, 401 Unauthorized when the
 * account is gone, then auth_check_login on the account (429 while throttled, 401
 * Invalid credentials on a mismatch). ERR_OK with the account in *out (arena strings). */
err_t auth_check_own_password(hs_req *req, const char *password, account_card *out);
/* Ends the token req was made with (logout), whatever its kind (customer, provider, staff,
 * administrator, impersonation): refused from now on, on every instance. */
err_t auth_end_caller_token(hs_req *req);
/* `marketplace staff unlock`: forgets the failed password checks counted against the staff or
 * administrator account of email (kind LOGIN_STAFF or LOGIN_ADMIN), so it can log in again at
 * once; *was_locked tells whether it was locked. ERR_INTERNAL when the database refused. */
err_t auth_login_unlock(login_kind kind, const char *email, bool *was_locked);

#endif

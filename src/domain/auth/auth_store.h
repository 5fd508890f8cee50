/* SQL for accounts and reset tokens. Internal to the auth domain. */
#ifndef DOMAIN_AUTH_STORE_H
#define DOMAIN_AUTH_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>
#include <stdbool.h>

typedef enum { ACCOUNT_USER, ACCOUNT_PROVIDER } account_kind;

typedef struct account {
  const char *id, *email, *name, *password_hash;
  int64_t token_gen; /* tokens carry it; a password reset moves it on */
} account;

/* Looks up an account by email; *found false when there is none. ERR_INTERNAL on failure. */
err_t auth_store_find(arena *a, account_kind kind, const char *email, account *out, bool *found);
/* Looks up an account by id; *found false when there is none. ERR_INTERNAL on failure. */
err_t auth_store_get(arena *a, account_kind kind, const char *id, account *out, bool *found);
/* Inserts a customer; ERR_CONFLICT when the email is taken. */
err_t auth_store_insert_user(const char *id, const char *email, const char *hash, const char *name,
                             const char *address, const char *zip);
/* Inserts a provider with its services and ZIPs (arrays of strings) in one transaction. */
err_t auth_store_insert_provider(const char *id, const char *email, const char *hash, const char *name,
                                 const char *phone, json_t *services, json_t *zips);
/* Replaces the reset token of (email, role) with token_hash and queues the email, in one
 * transaction. */
err_t auth_store_put_reset(const char *email, const char *role, const char *token_hash, int64_t expires_at,
                           const char *mail_subject, const char *mail_body);
/* Finds a live reset token; *found false when missing or expired. */
err_t auth_store_find_reset(arena *a, const char *token_hash, const char **role, bool *found);
/* Consumes a live token, sets the account's password and moves its token generation on (every
 * token issued before is refused from then on), in one transaction; ERR_BAD_REQUEST when the
 * token was used or expired meanwhile. *role receives the account role. */
err_t auth_store_use_reset(arena *a, const char *token_hash, const char *new_hash, const char **role);
/* Creates or updates an administrator. */
err_t auth_store_upsert_admin(const char *email, const char *hash);
/* Whether an administrator has this email. */
err_t auth_store_admin_exists(const char *email, bool *exists);
/* Creates an administrator unless the email has one (*created false, nothing changed). */
err_t auth_store_insert_admin(const char *email, const char *hash, bool *created);

#endif

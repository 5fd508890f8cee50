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
  int64_t token_gen; /* tokens carry it; a password reset or change and logout-all move it on */
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
/* ---- the owner's account management (issue 24) ---- */

/* Sets the account's password to new_hash and moves its token generation on (every token
 * issued before ends; *gen receives the new one), drops its pending reset links and queues
 * the notice to its email, in one transaction; ERR_NOT_FOUND when the account is gone. */
err_t auth_store_change_password(account_kind kind, const char *id, const char *new_hash, const char *mail_subject,
                                 const char *mail_body, int64_t *gen);
/* Replaces the account's pending email change with one to email, keeping token_hash (the
 * SHA-256 of the link's token) until expires_at, and queues the link's email to the new
 * address, in one transaction. */
err_t auth_store_put_email_change(account_kind kind, const char *id, const char *email, const char *token_hash,
                                  int64_t expires_at, const char *mail_subject, const char *mail_body);
/* Consumes the live email change of token_hash and gives its account the new email, drops the
 * account's reset links (they name the old address) and queues a notice to the old address,
 * in one transaction. ERR_BAD_REQUEST: no such live change (used, expired, or its account was
 * deleted); ERR_CONFLICT: the email was taken meanwhile (the change is kept, nothing else
 * changes). *email receives the new address (arena a). */
err_t auth_store_use_email_change(arena *a, const char *token_hash, const char **email);
/* Records that the token token_id ended (logout) until expires_at (epoch ms), when it would
 * have expired anyway. */
err_t auth_store_end_token(const char *token_id, int64_t expires_at);
/* Moves the account's token generation on: every token issued before ends (logout-all). */
err_t auth_store_end_all(account_kind kind, const char *id);
/* Deletes ended tokens and email changes that expired before now. */
err_t auth_store_prune(int64_t now);

/* Creates or updates an administrator. */
err_t auth_store_upsert_admin(const char *email, const char *hash);
/* Whether an administrator has this email. */
err_t auth_store_admin_exists(const char *email, bool *exists);
/* Creates an administrator unless the email has one (*created false, nothing changed). */
err_t auth_store_insert_admin(const char *email, const char *hash, bool *created);

#endif

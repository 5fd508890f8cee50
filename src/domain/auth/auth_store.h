/* SQL for accounts and reset tokens. Internal to the auth domain. */
#ifndef DOMAIN_AUTH_STORE_H
#define DOMAIN_AUTH_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "domain/auth/auth_tokens_store.h"
#include "domain/domain.h"
#include <jansson.h>
#include <stdbool.h>

typedef enum { ACCOUNT_USER, ACCOUNT_PROVIDER } account_kind;

/* What a change of the auth store came to; auth_fail (auth_api.c) answers each but AUTH_DONE. */
typedef enum {
  AUTH_DONE,
  AUTH_FAILED,      /* the database failed */
  AUTH_EMAIL_TAKEN, /* the address is another account's (the unique index said so) */
  AUTH_RESET_GONE,  /* the reset token was used or expired, or its account was deleted */
  AUTH_CHANGE_GONE, /* the email-change link was used, expired or cancelled, or its account's
                       tokens ended since it was asked for */
  AUTH_TOO_OFTEN,   /* asked too often: the caller has the seconds until it may be asked again */
} auth_outcome;

typedef struct account {
  const char *id, *email, *name, *password_hash;
  int64_t token_gen; /* tokens carry it; a password reset or change and logout-all move it on */
} account;

/* Looks up an account by email; *found false when there is none. ERR_INTERNAL on failure. */
err_t auth_store_find(arena *a, account_kind kind, const char *email, account *out, bool *found);
/* Looks up an account by id; *found false when there is none. ERR_INTERNAL on failure. */
err_t auth_store_get(arena *a, account_kind kind, const char *id, account *out, bool *found);
/* Inserts a customer and its first session (s, g) in one transaction; AUTH_EMAIL_TAKEN when the
 * email is taken. */
auth_outcome auth_store_insert_user(const char *id, const char *email, const char *hash, const char *name,
                                    const char *address, const char *zip, const session_row *s, const session_grant *g);
/* Inserts a provider with its services and ZIPs (arrays of strings) and its first session (s, g)
 * in one transaction; AUTH_EMAIL_TAKEN when the email is taken. */
auth_outcome auth_store_insert_provider(const char *id, const char *email, const char *hash, const char *name,
                                        const char *phone, json_t *services, json_t *zips, const session_row *s,
                                        const session_grant *g);
/* Replaces the reset token of (email, role) with token_hash for account account_id (the reset
 * sets that account's password, whatever its email is by then) and queues the email, in one
 * transaction. */
err_t auth_store_put_reset(const char *email, const char *role, const char *account_id, const char *token_hash,
                           int64_t expires_at, const char *mail_subject, const char *mail_body);
/* Finds a live reset token; *found false when missing or expired. */
err_t auth_store_find_reset(arena *a, const char *token_hash, const char **role, bool *found);
/* Consumes a live token, sets the account's password and moves its token generation on (every
 * token issued before is refused from then on), and ends its sessions and its pending email
 * change, in one
 * transaction; AUTH_RESET_GONE when the token was used or expired meanwhile. *role and *email
 * receive the account's role and email. */
auth_outcome auth_store_use_reset(arena *a, const char *token_hash, const char *new_hash, const char **role,
                                  const char **email);
/* ---- the owner's account management (issue 24) ---- */

/* Sets the account's password to new_hash and moves its token generation on (every token
 * issued before ends, its sessions too; *gen receives the new one), drops its pending reset links
 * and email change and queues the notice to its email, in one transaction; ERR_NOT_FOUND when the account
 * is gone. */
err_t auth_store_change_password(account_kind kind, const char *id, const char *new_hash, const char *mail_subject,
                                 const char *mail_body, int64_t *gen);
/* An email change asked for: the account (kind, id, token generation gen), the new address,
 * the SHA-256 of the confirmation link's token (sent to the new address) and of the cancel
 * link's (sent to the current address), and the two emails. */
typedef struct email_change_ask {
  account_kind kind;
  const char *id, *email, *token_hash, *cancel_hash;
  int64_t gen, expires_at;
  const char *to_new_subject, *to_new_body, *to_old, *to_old_subject, *to_old_body;
} email_change_ask;
/* Replaces the account's pending email change with ask and queues both emails, in one
 * transaction, unless the account asked EMAIL_CHANGES_PER_HOUR times in the last hour or the
 * address was asked for EMAIL_CHANGES_PER_ADDRESS times in the last day: AUTH_TOO_OFTEN,
 * *retry_after_s the seconds until the next may be asked for (nothing is written). */
#define EMAIL_CHANGES_PER_HOUR 5
#define EMAIL_CHANGES_PER_ADDRESS 3
auth_outcome auth_store_put_email_change(const email_change_ask *ask, int *retry_after_s);
/* The live email change of token_hash whose account's tokens were not ended since it was asked
 * for: the new address in *email (arena a), *found false when there is none. */
err_t auth_store_find_email_change(arena *a, const char *token_hash, const char **email, bool *found);
/* Cancels the email change whose cancel link has the SHA-256 cancel_hash (the current address
 * refused it); *cancelled false when there was none (used, expired or cancelled already). The
 * new address is in *email (arena a) when found. */
err_t auth_store_cancel_email_change(arena *a, const char *cancel_hash, const char **email, bool *cancelled);
/* Consumes the live email change of token_hash and gives its account the new email, drops the
 * account's reset links (they name the old address) and queues a notice to the old address,
 * in one transaction. AUTH_CHANGE_GONE: no such live change (used, expired, cancelled, its
 * account deleted, or its account's tokens ended since it was asked for); AUTH_EMAIL_TAKEN: the
 * email was taken meanwhile (the change is kept, nothing else changes). *email receives the new
 * address (arena a). */
auth_outcome auth_store_use_email_change(arena *a, const char *token_hash, const char **email);
/* Moves the account's token generation on: every token issued before ends, and its sessions,
 * its pending email change and its push devices with them (logout-all). */
err_t auth_store_end_all(account_kind kind, const char *id);
/* Deletes email changes that expired before now, email-change requests older than a day and
 * reset links a day past their expiry. */
err_t auth_store_prune(int64_t now);

/* Creates or updates an administrator. */
err_t auth_store_upsert_admin(const char *email, const char *hash);
/* Whether an administrator has this email. */
err_t auth_store_admin_exists(const char *email, bool *exists);
/* Creates an administrator unless the email has one (*created false, nothing changed). */
err_t auth_store_insert_admin(const char *email, const char *hash, bool *created);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's pendingEmailChange (account_part's sql): the live pending email change (email,
 * expires_at), none or one row. */
extern const char *const AUTH_EXPORT_SQL[2];
/* forget_in: the account's sessions, reset links and pending email change go, then its row: erased
 * (FORGET_ERASE: email deleted-<id>@deleted, no password, its tokens end, deleted_at now) or
 * deleted; ERR_NOT_FOUND when it was gone (or erased) already. The records of its email
 * changes stay for the throttle's day (auth_store_prune). */
err_t auth_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif

/* The accounts domain's storage: the erasure of an account its owner deletes and the export,
 * each made of the domains' parts of an account (domain/domain.h: forget_in, export_in, which
 * src/domains.c iterates), so a table added with its owner's part is never left out. Internal. */
#ifndef DOMAIN_ACCOUNTS_ACCOUNTS_STORE_H
#define DOMAIN_ACCOUNTS_ACCOUNTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "domain/domain.h"
#include <jansson.h>
#include <stdbool.h>

/* Whether a job of the account (its own as a customer, assigned to it as a provider) is
 * ACCEPTED, ON_THE_WAY or IN_PROGRESS. */
err_t accounts_store_busy(bool provider, const char *id, bool *busy);
/* What an erasure came to; accounts_fail (accounts_api.c) answers each but ERASE_DONE. */
typedef enum {
  ERASE_DONE,
  ERASE_FAILED, /* the database failed: nothing was erased */
  ERASE_BUSY,   /* a job of the account is accepted, on the way or in progress */
  ERASE_GONE,   /* the account was deleted or erased meanwhile */
} erase_outcome;

/* The customer's jobs that are not COMPLETED whose job payment still holds an authorization
 * (id): their holds are released before the account is erased. */
err_t accounts_store_held_jobs(arena *a, const char *id, db_res **out);
/* Erases the account in one transaction (every domain's forget_in, FORGET_ERASE), keeping what
 * the ledger needs: a customer's open jobs are cancelled and every job of it loses its address
 * and photos; a provider's pending quotes are withdrawn; the addresses, favorites, notes,
 * notifications, banner, support tickets, reset links, email changes, recurring requests, a
 * customer's seasonal-alert records go, its reports lose it; its messages keep their text under
 * ACCOUNT_DELETED_NAME, its photo messages become "[Photo removed]"; its row keeps its id and is
 * erased (name, email, phone, address, push token, documents, premium), its tokens end.
 * Payments, payouts, jobs, accepted and rejected quotes and reviews stay. The keys of the stored
 * files it names are appended to files (to delete after the commit). ERASE_BUSY: a job of the
 * account runs (checked again inside the transaction, after the open jobs were closed to
 * acceptance); ERASE_GONE: already deleted. */
erase_outcome accounts_store_erase(bool provider, const char *id, json_t *files);
/* Gathers the export's members into x (every domain's export_in, on one connection):
 * ERR_NOT_FOUND when the account is deleted or missing. */
err_t accounts_store_export(bool provider, const char *id, account_export *x);

#endif

/* SQL of the accounts domain: the erasure of an account its owner deletes, and the reads of its
 * export. Internal. Like the GODMODE deletion (domain/admin/admin_store.h), the erasure spans
 * every table that names an account: a table added later that holds an account's personal
 * data must be added to it (and to the export). The jobs and quotes tables are changed through
 * their domains (jobs_erase_customer_in, quotes_withdraw_provider_in). */
#ifndef DOMAIN_ACCOUNTS_ACCOUNTS_STORE_H
#define DOMAIN_ACCOUNTS_ACCOUNTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>
#include <stdbool.h>

/* The name an erased account keeps, on its reviews, messages, jobs and payments. Its email
 * becomes deleted-<id>@deleted, which no email check admits (a domain needs a dot), so nobody
 * can register it first and block the erasure. */
#define ACCOUNTS_DELETED_NAME "Deleted account"

/* Whether a job of the account (its own as a customer, assigned to it as a provider) is
 * ACCEPTED, ON_THE_WAY or IN_PROGRESS. */
err_t accounts_store_busy(bool provider, const char *id, bool *busy);
/* The customer's jobs that are not COMPLETED whose job payment still holds an authorization
 * (id): their holds are released before the account is erased. */
err_t accounts_store_held_jobs(arena *a, const char *id, db_res **out);
/* Erases the account in one transaction, keeping what the ledger needs: a customer's open jobs
 * are cancelled and every job of it loses its address and photos; a provider's pending quotes
 * are withdrawn; the addresses, favorites, notes, notifications, banner, support tickets,
 * reset links, email changes, recurring requests (and a customer's reports, seasonal-alert
 * records) go; its messages keep their text under ACCOUNTS_DELETED_NAME, its photo messages
 * become "[Photo removed]"; its row keeps its id and is erased (name, email, phone, address,
 * push token, documents, premium), its tokens end. Payments, jobs, accepted and rejected
 * quotes and reviews stay. The keys of the stored files it names are appended to files (to
 * delete after the commit). ERR_CONFLICT: a job of the account runs (checked again inside the
 * transaction, after the open jobs were closed to acceptance); ERR_NOT_FOUND: already deleted. */
err_t accounts_store_erase(bool provider, const char *id, json_t *files);

/* One part of an export: its member name and the rows it holds. */
typedef struct account_part {
  const char *key;
  db_res *rows;
} account_part;
#define ACCOUNTS_PARTS 17
/* The account's row (`SELECT *`, member "account"; no row when it is deleted or missing) and
 * every record of it, each part oldest first: a customer's addresses, jobs, the quotes on them,
 * payments, reviews, reports, recurring requests, the messages of its jobs' threads, favorites,
 * notes, notifications, support tickets, seasonal-alert records and its pending email change
 * (none or one row);
 * a provider's assigned jobs, its quotes, its reviews, recurring requests, messages,
 * notifications, support tickets and pending email change. *n receives the number of parts. */
err_t accounts_store_records(arena *a, bool provider, const char *id, account_part out[ACCOUNTS_PARTS], int *n);

#endif

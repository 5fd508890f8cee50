/* SQL of the administrator area. Internal. An account's deletion is every domain's part of it
 * (domain/domain.h: forget_in), so a table added with its owner's part goes with it. */
#ifndef DOMAIN_ADMIN_STORE_H
#define DOMAIN_ADMIN_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "domain/audit/audit.h"
#include <jansson.h>

/* The administrator with this email (id, email, password_hash); no row when none. */
err_t admin_store_find_email(arena *a, const char *email, db_res **out);
/* Every customer (provider), newest first, at most limit. */
err_t admin_store_users(arena *a, int limit, db_res **out);
err_t admin_store_providers(arena *a, int limit, db_res **out);
/* Queues (replaces) the account's banner and records act, in one transaction. */
err_t admin_store_put_banner(const char *account_id, const char *role, const char *icon, const char *title,
                             const char *body, const audit_action *act);
/* The customer's jobs whose job payment is still AUTHORIZED, to void before deleting (a
 * provider's jobs keep their payments, in their history: admin_store_delete_account). */
err_t admin_store_authorized_jobs(arena *a, const char *id, db_res **out);
/* The cells that name the stored files going with the account (a key, a JSON array of keys,
 * or a photo message's "[IMAGE]<url>"), as three results: a provider's logo, headshots,
 * licence and insurance documents, the photos of the jobs it is released from, and the photos
 * of its message threads; a customer's address photos, the photos of its jobs, and of their
 * message threads. */
err_t admin_store_account_files(arena *a, const char *role, const char *id, db_res *out[3]);
/* Deletes the account and what hangs on it (every domain's forget_in, FORGET_DELETE), and
 * records act, in one transaction (ERR_NOT_FOUND when it is already gone). A provider's jobs go
 * back to PENDING, their payments to the jobs' history (given back after the commit). */
err_t admin_store_delete_account(const char *role, const char *id, const audit_action *act);

/* A run of POST /admin/generate: its tag (in every email it makes), the shared password's
 * hash, and the jobs per customer. */
typedef struct admin_generation {
  const char *tag, *hash;
  int per_customer;
} admin_generation;
/* Generated customers from..to-1 with their jobs (added to *jobs), in one transaction. */
err_t admin_store_generate_customers(arena *a, const admin_generation *g, int from, int to, int *jobs);
/* Generated providers from..to-1, in one transaction: two services and three ZIPs each. */
err_t admin_store_generate_providers(arena *a, const admin_generation *g, int from, int to);

#endif

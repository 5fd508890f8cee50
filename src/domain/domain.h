/* A domain is the unit of the service: one declaration that start-up and routing both iterate
 * (src/domains.c lists them), like Redis's command table, so adding a domain is one line there.
 *
 * Every domain has the same rooms (docs/architecture.md):
 *   <d>.h          what other domains may call, and `extern const domain_def <d>_domain;`
 *   <d>_routes.c   its route rows and their schemas, nothing else
 *   <d>_api.c ...  handlers: read the validated request, call the store, answer
 *   <d>_store.c    the only files with SQL and transactions (several *_store.c where a domain
 *                  has several parts)
 *   <d>.c          the domain's declaration and its start-up and shutdown work
 * A table has one owning store (src/domain/tables.json, which scripts/check_shape.py enforces);
 * another domain changes its rows through that store's public functions. A domain never
 * includes another domain's store or api header, and domains do not call each other in circles
 * (scripts/check_shape.py fails `make test` when they do). */
#ifndef DOMAIN_DOMAIN_H
#define DOMAIN_DOMAIN_H
#include "core/jw.h"
#include "core/vec.h"
#include "db/db.h"
#include "ext/queue.h"
#include "http/http.h"
#include "http/openapi.h"
#include "http/rowjson.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kind of background work the domain runs (ext/queue.h): queued by the domain's own changes
 * (queue_enqueue in their transactions), or, with a period, once per period by the clock. */
typedef enum { JOB_LIGHT, JOB_HEAVY } job_weight; /* heavy: document recognition's workers */
typedef struct domain_job {
  const char *kind;  /* job_queue.kind, e.g. "payment_capture" */
  queue_handler run; /* one unit of work; true when done, false to retry */
  job_weight weight; /* JOB_LIGHT (default) or JOB_HEAVY */
  int64_t period_ms; /* > 0: a periodic task (queue_every); 0: queued by changes */
  /* instead of period_ms, a period read from the configuration at start-up (CFG's field):
   * > 0 a periodic task, 0 none (the setting is off) */
  const int64_t *period_from;
} domain_job;

/* An event kind the domain writes to the live-updates outbox (events_emit_in), as the OpenAPI
 * document lists it (http/openapi.h): {"quote.created", "Quote", "who receives it"}. */
typedef hs_stream_event domain_event;

/* ---- a domain's part of an account ----
 * Each table that names a customer's or provider's account has one owning store
 * (src/domain/tables.json), and the owner's domain exports and forgets its rows: the export
 * (GET /users/me/export) and the two erasures (DELETE /users/me by the owner, DELETE
 * /admin/accounts/:id by an administrator) iterate the domains, so a table added with its
 * owner's export_in and forget_in is never left out. */

/* The account a domain's part is about. */
typedef struct account_ref {
  const char *id;
  const char *role; /* "user" (a customer) or "provider" */
  bool provider;    /* role is "provider" */
  int64_t now;      /* one reading of the clock for every row the erasure writes */
  json_t *files;    /* forget_in: the keys of stored files its rows named are appended (to delete
                       once the erasure committed); NULL: nobody collects them */
} account_ref;

typedef enum {
  /* The owner erases the account: what the ledger keeps (jobs, payments, reviews, messages,
   * accepted quotes, the account's row by its id) stays, anonymised; the rest goes; the
   * account's row gets deleted_at, and answers no more. */
  FORGET_ERASE,
  /* An administrator deletes the account (GODMODE): every row that names it goes. */
  FORGET_DELETE,
} forget_mode;

/* The name an erased account keeps on what the ledger keeps of it (its row, its messages, the
 * reviews and jobs that show it). Its email becomes deleted-<id>@deleted, which no email check
 * admits (a domain needs a dot), so nobody can register it first and block the erasure. */
#define ACCOUNT_DELETED_NAME "Deleted account"

/* Runs sql[0..n-1] in order on c (NULL ones skipped), $1 the account's id and $2 who->now
 * where a statement names it; *changes (when not NULL) receives the rows the last one changed.
 * For a store's forget_in. */
err_t account_exec_in(db_conn *c, const account_ref *who, const char *const *sql, int n, int64_t *changes);
/* Appends to who->files the keys of the stored files every cell of sql's rows names ($1 the
 * account's id; common_cell_keys): nothing to do when who->files is NULL. */
err_t account_files_in(db_conn *c, const account_ref *who, const char *sql);

/* An account's export being gathered: each domain adds its members (the document's order is
 * the export's: domain/accounts). */
typedef struct account_member {
  const char *key;
  jw w; /* the member's value */
} account_member;
typedef struct account_export {
  arena *a; /* where the members are written */
  VEC(account_member) members;
} account_export;
/* A writer for the value of member key of the export (a fresh one, in x's arena). */
jw *account_export_member(account_export *x, const char *key);
/* The member key, or NULL when no domain wrote it. */
const account_member *account_export_find(const account_export *x, const char *key);
/* The rows of a domain's parts of an account: part i's statement is sql[i][0] for a customer,
 * sql[i][1] for a provider ($1 the account's id, $2 who->now), NULL when the part is not the
 * role's (out[i] is then NULL); they run together on c (one round trip on PostgreSQL). */
err_t account_read_in(db_conn *c, arena *a, const account_ref *who, const char *const (*sql)[2], int n, db_res **out);
/* Member key as an array of fields' objects, one per row of r (nothing when r is NULL). */
void account_export_rows(account_export *x, const char *key, const hs_rj_field *fields, const db_res *r);
/* Member key as the object of r's first row, or null without one (nothing when r is NULL). */
void account_export_one(account_export *x, const char *key, const hs_rj_field *fields, const db_res *r);
/* A member of the export that is one read's rows: its key, its statements (sql[0] a customer's,
 * sql[1] a provider's, as account_read_in's; NULL: not the role's) and its fields, written as an
 * array of objects, or with one as the first row's object (null without one). */
typedef struct account_part {
  const char *key;
  const char *const *sql;
  const hs_rj_field *fields;
  bool one;
} account_part;
/* Reads parts (ended by a row with key NULL) together on c and writes their members to x: an
 * export_in of such parts only. */
err_t account_export_parts_in(db_conn *c, const account_ref *who, account_export *x, const account_part *parts);

typedef struct domain_def {
  const char *name;
  const hs_route *routes;     /* its rows, ended by a row of zeros (method 0); NULL: none */
  const domain_job *jobs;     /* its background work, ended by a row with kind NULL; NULL: none */
  const domain_event *events; /* its live-update kinds, ended by a row with kind NULL; NULL: none */
  const hs_hooks *hooks;      /* its request hooks (http.h), added in list order; NULL: none */
  /* its event kinds that stand for a record read once (the banner: events.h's events_oneshot),
   * ended by NULL; NULL: none */
  const struct events_oneshot *const *oneshots;
  /* At start-up of `serve` and `demo`, in list order, once the database, the password pool,
   * mail and the payment processor are ready, after the jobs and hooks above were registered
   * and before the queue workers and the listener start: caches, threads, wiring to other
   * domains. NULL: nothing to do. */
  void (*init)(void);
  /* At shutdown, in reverse list order, after the listener and the queue workers stopped and
   * before the database closes. NULL: nothing to do. */
  void (*stop)(void);
  /* Its part of an account (NULL: it holds none). export_in adds its members to x from its
   * rows, read on c (no transaction); ERR_NOT_FOUND from the domain of the account's row when
   * it is gone. forget_in erases its rows that name the account (mode), on c inside the
   * erasing transaction, the rows of other domains' before those they name; the account's own
   * row (auth) answers ERR_NOT_FOUND when it was gone already, which rolls everything back. */
  err_t (*export_in)(db_conn *c, const account_ref *who, account_export *x);
  err_t (*forget_in)(db_conn *c, const account_ref *who, forget_mode mode);
  /* Instead of export_in, where each member of its part of the export is one read's rows: those
   * members as rows (ended by a row with key NULL), read and written by account_export_parts_in. */
  const account_part *export_parts;
} domain_def;

/* Every domain, in list order (src/domains.c); *n receives the count. */
const domain_def *const *domains_all(size_t *n);
/* Every domain's export_in for who, in list order; the first error ends it. */
err_t domains_export_in(db_conn *c, const account_ref *who, account_export *x);
/* Every domain's forget_in for who, in reverse list order (a domain's rows go before those of
 * the domains below it that they name; the account's row, in auth, is the last but the
 * live-update outbox's); the first error ends it. */
err_t domains_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif

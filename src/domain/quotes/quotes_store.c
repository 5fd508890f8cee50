/* SQL of the quotes domain. Submitting and accepting are single transactions whose
 * conditional updates decide races: one quote per provider per job (unique index), one
 * acceptance per job (the job leaves PENDING/QUOTED exactly once). */
#include "domain/quotes/quotes_store.h"
#include "core/clock.h"
#include "domain/events/events.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "domain/quotes/quotes.h"
#include "domain/shapes.h"
#include "ext/mail.h"

/* The Quote JSON of the inserted row (*arg, a `quotes.*` row that comes back with a later
 * round trip); NULL when it did not come back. */
static const char *quote_json(arena *a, const void *arg) {
  db_res *const *q = arg;
  if (!*q || (*q)->rows != 1) return NULL;
  jw w;
  jw_init(&w, a, 512);
  hs_rj_object(&w, hs_rj_bind(a, SHAPE_QUOTE, *q), *q, 0);
  return jw_text(&w);
}

/* quote.created for the new quote (*q, once it came back) of provider on customer's job, on c:
 * to the customer, the quoting provider and customer support (who read a customer's jobs with
 * their quotes). */
static db_rc quote_created(db_conn *c, db_res **q, const char *provider, const char *customer) {
  event_new ev = {.kind = "quote.created",
                  .data_of = quote_json,
                  .data_arg = q,
                  .user_id = customer,
                  .provider_id = provider,
                  .staff = ROLE_CUSTOMER_SUPPORT};
  return events_emit_in(c, &ev);
}

/* Whether the customer (cu) or the provider (p) has a push device (notifications.h). */
#define CUSTOMER_DEVICE PUSH_DEVICE_SQL("cu.id", "user")
#define PROVIDER_DEVICE PUSH_DEVICE_SQL("p.id", "provider")

/* The news of a change, on c. */
static err_t announce(db_conn *c, const quote_news *news) {
  db_rc rc = mail_enqueue(c, news->email, news->subject, news->mail_body);
  if (rc == DB_OK)
    rc = news->device_known ? notify_in_known(c, &news->note, news->has_device) : notify_in(c, &news->note);
  return db_to_err(rc);
}

quote_outcome quotes_store_submit(arena *a, const char *provider_id, const char *job_id, quote_decide decide, void *ctx,
                                  db_res **quote) {
  static const char *const open[] = {"PENDING", "QUOTED", NULL};
  db_res *read;
  quote_new q = {0};
  quote_news news = {0};
  bool moved = false;
  quote_outcome out = QUOTE_CREATED;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e)
    e = db_to_err(db_exec(
        c, a, &read,
        "SELECT j.*, pr.headshots AS provider_headshots, pr.id_doc_front AS provider_id_doc_front, "
        "pr.id_doc_back AS provider_id_doc_back, pr.name AS provider_name, "
        "pr.company_name AS provider_company_name, cu.email AS customer_email, cu.name AS customer_name, "
        CUSTOMER_DEVICE " AS customer_push_device, "
        "CASE WHEN EXISTS (SELECT 1 FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
        "WHERE s.provider_id = pr.id AND s.service = j.service AND z.zip = j.zip) THEN 1 ELSE 0 END "
        "AS provider_matches "
        "FROM providers pr LEFT JOIN jobs j ON j.id = $2 LEFT JOIN users cu ON cu.id = j.customer_id "
        "WHERE pr.id = $1",
        DB_ARGS(DB_TEXT(provider_id), DB_TEXT(job_id))));
  if (!e && (out = decide(ctx, a, read->rows ? ERR_OK : ERR_NOT_FOUND, read, &q, &news)) != QUOTE_CREATED)
    e = ERR_CONFLICT; /* ends the transaction without a change */
  int64_t now = clock_now_ms();
  if (!e) {
    /* sent with the job's move: 3 round trips in all (the read, the writes, the queued work
     * with the COMMIT); a second quote of the provider fails there as a conflict */
    db_rc rc = db_exec_later(c, a, quote,
                             "INSERT INTO quotes (id, job_id, provider_id, service, amount_cents, platform_fee_cents, "
                             "total_cents, note, scheduled_at, status, created_at, updated_at, seq) "
                             "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'PENDING', $10, $10, $11) RETURNING *",
                             DB_ARGS(DB_TEXT(q.id), DB_TEXT(q.job_id), DB_TEXT(q.provider_id), DB_TEXT(q.service),
                                     DB_INT(q.amount_cents), DB_INT(q.fee_cents), DB_INT(q.amount_cents + q.fee_cents),
                                     DB_TEXT(q.note), q.has_scheduled ? DB_INT(q.scheduled_at) : DB_NULL, DB_INT(now),
                                     DB_INT(clock_sequence())));
    e = db_to_err(rc);
    if (!e) e = db_to_err(quote_created(c, quote, q.provider_id, db_field(read, 0, "customer_id")));
  }
  if (!e) e = db_to_err(jobs_move_in(c, read, 0, open, "QUOTED", now, &moved));
  if (!e && !moved) out = QUOTE_NOT_OPEN, e = ERR_CONFLICT; /* the job left PENDING/QUOTED meanwhile */
  if (!e) e = announce(c, &news);
  e = db_end(c, e);
  /* a constraint (with the INSERT, or with the statements it rides with) is the one quote per
   * provider per job */
  if (out == QUOTE_CREATED && e) out = e == ERR_CONFLICT ? QUOTE_DUPLICATE : QUOTE_FAILED;
  return out;
}

#define QUOTE_SQL "SELECT q.*, j.customer_id, j.status AS job_status"
#define QUOTE_FROM " FROM quotes q JOIN jobs j ON j.id = q.job_id"

err_t quotes_store_get(arena *a, const char *id, bool with_parties, db_res **out) {
  const char *sql = with_parties ? QUOTE_SQL ", p.email AS provider_email, p.name AS provider_name, "
                                             PROVIDER_DEVICE " AS provider_push_device, "
                                             "u.name AS customer_name" QUOTE_FROM
                                             " LEFT JOIN providers p ON p.id = q.provider_id "
                                             "LEFT JOIN users u ON u.id = j.customer_id WHERE q.id = $1"
                                 : QUOTE_SQL QUOTE_FROM " WHERE q.id = $1";
  return db_query_row(a, out, sql, DB_ARGS(DB_TEXT(id)));
}

db_read quotes_store_read(arena *a, const char *id) {
  return db_read_make(a, QUOTE_SQL QUOTE_FROM " WHERE q.id = $1", DB_ARGS(DB_TEXT(id)));
}

err_t quotes_store_accept(const char *quote_id, const char *job_id, const char *provider_id, const quote_news *news,
                          bool *won) {
  int64_t now = clock_now_ms();
  *won = false;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(jobs_accept_in(c, job_id, provider_id, now, won));
  if (!e && !*won) return db_end(c, e); /* another acceptance (or a cancellation) came first */
  /* nothing waits for its answer: it goes with the next statement */
  if (!e)
    e = db_to_err(db_exec_later(c, NULL, NULL,
                                "UPDATE quotes SET status = CASE WHEN id = $2 THEN 'ACCEPTED' ELSE 'REJECTED' END, "
                                "accepted_at = CASE WHEN id = $2 THEN $3 ELSE accepted_at END, updated_at = $3 "
                                "WHERE job_id = $1",
                                DB_ARGS(DB_TEXT(job_id), DB_TEXT(quote_id), DB_INT(now))));
  if (!e) e = db_to_err(payments_follow_up(c, job_id));
  if (!e) e = announce(c, news);
  e = db_end(c, e);
  if (e) *won = false;
  return e;
}

err_t quotes_store_recent_accepted(arena *a, const char *service, db_res **out) {
  return db_query(a, out,
                  "SELECT amount_cents FROM quotes WHERE service = $1 AND status = 'ACCEPTED' "
                  "ORDER BY accepted_at DESC LIMIT 50",
                  DB_ARGS(DB_TEXT(service))) == DB_OK
             ? ERR_OK
             : ERR_INTERNAL;
}

const db_keyset JOB_QUOTES_KEYSET = {"job-quotes", {{"q.seq", "seq", 'i', false}, {"q.id", "id", 's', false}}};

db_read quotes_store_read_for_job(arena *a, const char *job_id, const db_page *pg) {
  db_val args[DB_PAGE_ARGS(1)] = {DB_TEXT(job_id)};
  return db_page_read(a, pg,
                      "SELECT q.*, p.name, p.phone, p.company_name, p.company_url, p.insurance_info, p.logo_url, "
                      "(SELECT AVG(CAST(rating AS DOUBLE PRECISION)) FROM reviews r WHERE r.provider_id = p.id) AS "
                      "average_rating FROM quotes q JOIN providers p ON p.id = q.provider_id WHERE q.job_id = $1",
                      args, 1);
}

const db_keyset PROVIDER_QUOTES_KEYSET = {"provider-quotes", {{"q.seq", "seq", 'i', true}, {"q.id", "id", 's', true}}};

err_t quotes_store_of_provider(arena *a, const char *provider_id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT q.*, j.status AS job_status, j.service AS job_service FROM quotes q "
                      "JOIN jobs j ON j.id = q.job_id WHERE q.provider_id = $1",
                      provider_id, out);
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const QUOTES_EXPORT_SQL[2] = {
    "SELECT q.* FROM quotes q JOIN jobs j ON j.id = q.job_id WHERE j.customer_id = $1 ORDER BY q.seq",
    "SELECT * FROM quotes WHERE provider_id = $1 ORDER BY seq",
};

/* $1 = the account's id: [mode][provider]. An erasure keeps a provider's ACCEPTED and REJECTED
 * quotes, the ledger's. */
static const char *const forget_sql[][2] = {
    [FORGET_ERASE] = {NULL, "DELETE FROM quotes WHERE provider_id = $1 AND status = 'PENDING'"},
    [FORGET_DELETE] = {"DELETE FROM quotes WHERE job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
                       "DELETE FROM quotes WHERE provider_id = $1"},
};

err_t quotes_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  /* jobs only the provider had quoted go back to PENDING first */
  db_rc rc = who->provider ? jobs_reopen_quoted_by_in(c, who->id, who->now) : DB_OK;
  return rc != DB_OK ? db_to_err(rc) : account_exec_in(c, who, &forget_sql[mode][who->provider], 1, NULL);
}

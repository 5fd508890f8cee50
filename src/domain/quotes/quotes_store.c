/* SQL of the quotes domain. Submitting and accepting are single transactions whose
 * conditional updates decide races: one quote per provider per job (unique index), one
 * acceptance per job (the job leaves PENDING/QUOTED exactly once). */
#include "domain/quotes/quotes_store.h"
#include "core/clock.h"
#include "domain/jobs/jobs.h"
#include "domain/payments/payments.h"
#include "ext/mail.h"
#include "ext/queue.h"

/* The news of a change, then its commit. */
static db_rc announce_and_commit(db_conn *c, const quote_news *news) {
  db_rc rc = mail_enqueue(c, news->email, news->subject, news->mail_body);
  if (rc == DB_OK)
    rc = news->push_token_known ? notify_in_token(c, &news->note, news->push_token) : notify_in(c, &news->note);
  if (rc == DB_OK) rc = db_commit(c);
  if (rc == DB_OK) queue_kick();
  return rc;
}

err_t quotes_store_open(arena *a, const char *provider_id, const char *job_id, db_conn **c, db_res **out) {
  *c = db_acquire();
  db_rc rc = db_begin(*c);
  if (rc == DB_OK)
    rc = db_exec(
        *c, a, out,
        "SELECT j.*, pr.headshots AS provider_headshots, pr.id_doc_front AS provider_id_doc_front, "
        "pr.id_doc_back AS provider_id_doc_back, pr.name AS provider_name, "
        "pr.company_name AS provider_company_name, cu.email AS customer_email, cu.name AS customer_name, "
        "cu.push_token AS customer_push_token, "
        "CASE WHEN EXISTS (SELECT 1 FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
        "WHERE s.provider_id = pr.id AND s.service = j.service AND z.zip = j.zip) THEN 1 ELSE 0 END "
        "AS provider_matches "
        "FROM providers pr LEFT JOIN jobs j ON j.id = $2 LEFT JOIN users cu ON cu.id = j.customer_id "
        "WHERE pr.id = $1",
        DB_ARGS(DB_TEXT(provider_id), DB_TEXT(job_id)));
  if (rc != DB_OK) {
    quotes_store_close(*c);
    return ERR_INTERNAL;
  }
  return (*out)->rows ? ERR_OK : ERR_NOT_FOUND;
}

void quotes_store_close(db_conn *c) { db_release(c); }

err_t quotes_store_submit(db_conn *c, arena *a, const quote_new *q, const quote_news *news, const db_res *job,
                          db_res **quote) {
  static const char *const open[] = {"PENDING", "QUOTED", NULL};
  int64_t now = clock_now_ms();
  err_t e = ERR_INTERNAL;
  bool moved = false;
  db_rc rc = db_exec(c, a, quote,
                     "INSERT INTO quotes (id, job_id, provider_id, service, amount_cents, platform_fee_cents, "
                     "total_cents, note, scheduled_at, status, created_at, updated_at, seq) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'PENDING', $10, $10, $11) RETURNING *",
                     DB_ARGS(DB_TEXT(q->id), DB_TEXT(q->job_id), DB_TEXT(q->provider_id), DB_TEXT(q->service),
                             DB_INT(q->amount_cents), DB_INT(q->fee_cents), DB_INT(q->amount_cents + q->fee_cents),
                             DB_TEXT(q->note), q->has_scheduled ? DB_INT(q->scheduled_at) : DB_NULL, DB_INT(now),
                             DB_INT(clock_sequence())));
  if (rc == DB_CONSTRAINT) {
    e = ERR_CONFLICT;
    goto out;
  }
  if (rc != DB_OK || jobs_move_in(c, job, 0, open, "QUOTED", now, &moved) != DB_OK) goto out;
  if (!moved) {
    e = ERR_BAD_REQUEST; /* the job left PENDING/QUOTED meanwhile */
    goto out;
  }
  if (announce_and_commit(c, news) != DB_OK) goto out;
  e = ERR_OK;
out:
  db_release(c);
  return e;
}

err_t quotes_store_get(arena *a, const char *id, db_res **out) {
  if (db_query(a, out,
               "SELECT q.*, j.customer_id, j.status AS job_status FROM quotes q JOIN jobs j ON j.id = q.job_id "
               "WHERE q.id = $1",
               DB_ARGS(DB_TEXT(id))) != DB_OK)
    return ERR_INTERNAL;
  return (*out)->rows == 1 ? ERR_OK : ERR_NOT_FOUND;
}

err_t quotes_store_accept(const char *quote_id, const char *job_id, const char *provider_id, const quote_news *news,
                          bool *won) {
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e = ERR_INTERNAL;
  *won = false;
  db_conn *c = db_acquire();
  if (db_begin(c) != DB_OK) goto out;
  if (db_exec(c, &a, &r,
              "UPDATE jobs SET status = 'ACCEPTED', provider_id = $2, accepted_at = $3, updated_at = $3, "
              "json_head = NULL WHERE id = $1 AND status IN ('PENDING', 'QUOTED') RETURNING *",
              DB_ARGS(DB_TEXT(job_id), DB_TEXT(provider_id), DB_INT(now))) != DB_OK)
    goto out;
  if (r->rows == 0) {
    e = ERR_OK; /* another acceptance (or a cancellation) came first */
    goto out;
  }
  if (jobs_json_save_in(c, r, 0) != DB_OK) goto out;
  if (db_exec(c, NULL, NULL,
              "UPDATE quotes SET status = CASE WHEN id = $2 THEN 'ACCEPTED' ELSE 'REJECTED' END, "
              "accepted_at = CASE WHEN id = $2 THEN $3 ELSE accepted_at END, updated_at = $3 WHERE job_id = $1",
              DB_ARGS(DB_TEXT(job_id), DB_TEXT(quote_id), DB_INT(now))) != DB_OK ||
      payments_follow_up(c, job_id) != DB_OK || announce_and_commit(c, news) != DB_OK)
    goto out;
  *won = true;
  e = ERR_OK;
out:
  db_release(c);
  arena_fini(&a);
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

err_t quotes_store_for_job(arena *a, const char *job_id, db_res **out) {
  return db_query(a, out,
                  "SELECT q.*, p.name, p.phone, p.company_name, p.company_url, p.insurance_info, p.logo_url, "
                  "(SELECT AVG(CAST(rating AS DOUBLE PRECISION)) FROM reviews r WHERE r.provider_id = p.id) AS "
                  "average_rating "
                  "FROM quotes q JOIN providers p ON p.id = q.provider_id WHERE q.job_id = $1 ORDER BY q.seq",
                  DB_ARGS(DB_TEXT(job_id))) == DB_OK
             ? ERR_OK
             : ERR_INTERNAL;
}

err_t quotes_store_contact(arena *a, const char *table, const char *id, db_res **out) {
  const char *sql = table[0] == 'u' ? "SELECT email, name FROM users WHERE id = $1"
                                    : "SELECT email, name, company_name FROM providers WHERE id = $1";
  if (db_query(a, out, sql, DB_ARGS(DB_TEXT(id))) != DB_OK) return ERR_INTERNAL;
  return (*out)->rows ? ERR_OK : ERR_NOT_FOUND;
}

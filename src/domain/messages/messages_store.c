/* Message threads' SQL. The 250-message cap is enforced by the insert itself (INSERT ...
 * SELECT ... WHERE the thread holds fewer than 250), inside a transaction that first locks the
 * job's row, so concurrent posts never overshoot it. */
#include "domain/messages/messages_store.h"
#include "core/clock.h"
#include "domain/jobs/jobs.h"
#include <string.h>

err_t messages_store_thread_party(arena *a, const char *role, const char *caller_id, const char *job_id,
                                  const char *provider_id, const char *assigned, db_res **out) {
  if (!strcmp(role, "user"))
    return db_to_err(db_query(
        a, out,
        "SELECT u.name FROM users u WHERE u.id = $1 AND (EXISTS (SELECT 1 FROM quotes q "
        "WHERE q.job_id = $2 AND q.provider_id = $3) OR $3 = $4)",
        DB_ARGS(DB_TEXT(caller_id), DB_TEXT(job_id), DB_TEXT(provider_id), DB_TEXT(assigned ? assigned : ""))));
  return db_to_err(db_query(a, out,
                            "SELECT p.name FROM providers p WHERE p.id = $1 AND (EXISTS (SELECT 1 FROM quotes q "
                            "WHERE q.job_id = $2 AND q.provider_id = $1) OR $1 = $3)",
                            DB_ARGS(DB_TEXT(provider_id), DB_TEXT(job_id), DB_TEXT(assigned ? assigned : ""))));
}

const hs_keyset MESSAGES_KEYSET = {"messages", {{"seq", "seq", 'i', false}, {"id", "id", 's', false}}};

err_t messages_store_list(arena *a, const char *job_id, const char *provider_id, const hs_page *pg, db_res **out) {
  db_val args[HS_PAGE_ARGS(2)] = {DB_TEXT(job_id), DB_TEXT(provider_id)};
  return db_to_err(hs_page_query(
      a, pg, "SELECT " MESSAGE_COLUMNS " FROM messages WHERE job_id = $1 AND provider_id = $2", args, 2, out));
}

err_t messages_store_post(arena *a, const message_new *m, db_res **out) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(jobs_lock_in(c, m->job_id));
  if (!e)
    e = db_to_err(db_exec(
        c, a, out,
        "INSERT INTO messages (id, job_id, provider_id, sender_id, sender_role, sender_name, content, "
        "created_at, seq) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $10 WHERE "
        "(SELECT COUNT(*) FROM messages WHERE job_id = $2 AND provider_id = $3) < $9 RETURNING " MESSAGE_COLUMNS,
        DB_ARGS(DB_TEXT(m->id), DB_TEXT(m->job_id), DB_TEXT(m->provider_id), DB_TEXT(m->sender_id),
                DB_TEXT(m->sender_role), DB_TEXT(m->sender_name), DB_TEXT(m->content), DB_INT(clock_now_ms()),
                DB_INT(THREAD_CAP), DB_INT(clock_sequence()))));
  return db_end(c, e);
}

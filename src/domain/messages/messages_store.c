/* Message threads' SQL. The 250-message cap is enforced by the insert itself (INSERT ...
 * SELECT ... WHERE the thread holds fewer than 250), inside a transaction that first locks the
 * job's row, so concurrent posts never overshoot it. The message's event is written in the
 * same transaction. */
#include "domain/messages/messages_store.h"
#include "core/clock.h"
#include "domain/events/events.h"
#include "domain/jobs/jobs.h"
#include "domain/messages/messages.h"
#include <stdint.h>
#include <string.h>

/* message.created for the posted row r, to both parties of the thread: the Message as the
 * thread's GET writes it (a photo's link signed now). */
static db_rc announce(db_conn *c, arena *a, const message_new *m, const db_res *r) {
  jw w;
  jw_init(&w, a, 512);
  jw_obj(&w);
  jw_key_str(&w, "jobId", m->job_id);
  jw_key_str(&w, "providerId", m->provider_id);
  jw_key(&w, "message");
  jw_obj(&w);
  messages_write_members(a, &w, hs_rj_bind(a, MESSAGES_JSON, r), r, 0);
  jw_obj_end(&w);
  jw_obj_end(&w);
  event_new ev = {
      .kind = "message.created", .data = jw_text(&w), .user_id = m->customer_id, .provider_id = m->provider_id};
  return events_emit_in(c, &ev);
}

/* Whether the thread of provider (an expression) on job j is one: it quoted or is assigned. */
#define IS_THREAD(provider)                                                                                            \
  "(" provider " = j.provider_id OR EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = j.id AND q.provider_id = "      \
  provider "))"

/* one of the other party's push devices (notifications.h) */
#define PROVIDER_DEVICE PUSH_DEVICE_SQL("COALESCE($3, j.provider_id)", "provider")
#define CUSTOMER_DEVICE PUSH_DEVICE_SQL("j.customer_id", "user")

db_read messages_read_thread(arena *a, const char *role, const char *caller_id, const char *job_id,
                             const char *provider) {
  if (!strcmp(role, "user"))
    return db_read_make(a,
                        "SELECT j.id, j.customer_id, j.status, j.provider_id, "
                        "(SELECT u.name FROM users u WHERE u.id = $2 AND " IS_THREAD("COALESCE($3, j.provider_id)")
                        ") AS sender_name, "
                        PROVIDER_DEVICE " AS counterpart_push_device FROM jobs j WHERE j.id = $1",
                        DB_ARGS(DB_TEXT(job_id), DB_TEXT(caller_id), DB_TEXT(provider)));
  return db_read_make(a,
                      "SELECT j.id, j.customer_id, j.status, j.provider_id, "
                      "(SELECT p.name FROM providers p WHERE p.id = $2 AND " IS_THREAD("p.id") ") AS sender_name, "
                      CUSTOMER_DEVICE " AS counterpart_push_device FROM jobs j WHERE j.id = $1",
                      DB_ARGS(DB_TEXT(job_id), DB_TEXT(caller_id)));
}

const db_keyset MESSAGES_KEYSET = {"messages", {{"seq", "seq", 'i', false}, {"id", "id", 's', false}}};
const db_keyset MESSAGES_DESC_KEYSET = {"messages-desc", {{"seq", "seq", 'i', true}, {"id", "id", 's', true}}};

db_read messages_read_list(arena *a, const char *job_id, const char *provider, const db_page *pg) {
  db_val args[DB_PAGE_ARGS(2)] = {DB_TEXT(job_id), DB_TEXT(provider)};
  return db_page_read(a, pg,
                      "SELECT " MESSAGE_COLUMNS " FROM messages WHERE job_id = $1 "
                      "AND provider_id = COALESCE($2, (SELECT provider_id FROM jobs WHERE id = $1))",
                      args, 2);
}

/* The thread's last message and its unread count, for the threads in `last` (job_id,
 * provider_id, seq: the last message's as of the snapshot $4, live_seq: the last message's):
 * $2 is the side that reads ("user" or "provider"), $3 the other side. A thread is placed by
 * its last message as of the snapshot and shown with its newest. */
#define THREADS_SELECT(counterpart_id, counterpart_table)                                                              \
  "SELECT m.job_id, m.provider_id, j.service, " counterpart_id " AS counterpart_id, c.name AS counterpart_name, "      \
  "m.id, m.sender_id, m.sender_role, m.sender_name, m.content, m.created_at, last.seq AS last_seq, "                   \
  "(SELECT MAX(seq) FROM last) AS snapshot, "                                                                          \
  "(SELECT COUNT(*) FROM messages u WHERE u.job_id = m.job_id AND u.provider_id = m.provider_id "                      \
  "AND u.sender_role = $3 AND u.seq > COALESCE((SELECT r.read_seq FROM message_reads r WHERE r.job_id = m.job_id "     \
  "AND r.provider_id = m.provider_id AND r.reader_role = $2), 0)) AS unread_count "                                    \
  "FROM last JOIN messages m ON m.job_id = last.job_id AND m.provider_id = last.provider_id "                          \
  "AND m.seq = last.live_seq "                                                                                         \
  "JOIN jobs j ON j.id = m.job_id LEFT JOIN " counterpart_table " c ON c.id = " counterpart_id " "                     \
  "WHERE last.seq IS NOT NULL AND (j.provider_id = m.provider_id OR EXISTS (SELECT 1 FROM quotes q "                 \
  "WHERE q.job_id = m.job_id AND q.provider_id = m.provider_id))"

const db_keyset THREADS_KEYSET = {"threads",
                                  {{"last.seq", "last_seq", 'i', true},
                                   {"m.job_id", "job_id", 's', false},
                                   {"m.provider_id", "provider_id", 's', false}},
                                  .snapshot = "snapshot"};

/* a thread's last message as of the snapshot $4 (NULL: a thread begun after it) and its last */
#define LAST_SEQS(seq) "MAX(CASE WHEN " seq " <= $4 THEN " seq " END) AS seq, MAX(" seq ") AS live_seq"

err_t messages_store_threads(arena *a, const char *role, const char *caller_id, const db_page *pg, db_res **out) {
  bool customer = !strcmp(role, "user");
  db_val args[DB_PAGE_ARGS(4)] = {DB_TEXT(caller_id), DB_TEXT(customer ? "user" : "provider"),
                                  DB_TEXT(customer ? "provider" : "user"),
                                  DB_INT(pg->snapshot ? pg->snapshot : INT64_MAX)};
  const char *sql = customer ? "WITH last AS (SELECT m.job_id, m.provider_id, " LAST_SEQS("m.seq") " FROM messages m "
                               "JOIN jobs j ON j.id = m.job_id WHERE j.customer_id = $1 "
                               "GROUP BY m.job_id, m.provider_id) " THREADS_SELECT("m.provider_id", "providers")
                             : "WITH last AS (SELECT job_id, provider_id, " LAST_SEQS("seq") " FROM messages "
                               "WHERE provider_id = $1 GROUP BY job_id, provider_id) " THREADS_SELECT("j.customer_id",
                                                                                                       "users");
  return db_to_err(db_page_query(a, pg, sql, args, 4, out));
}

err_t messages_store_mark_read(const char *job_id, const char *provider_id, const char *reader_role) {
  return db_to_err(
      db_query(NULL, NULL,
               "INSERT INTO message_reads (job_id, provider_id, reader_role, read_seq, read_at) "
               "SELECT $1, $2, $3, COALESCE(MAX(seq), 0), $4 FROM messages WHERE job_id = $1 "
               "AND provider_id = $2 ON CONFLICT (job_id, provider_id, reader_role) DO UPDATE SET "
               "read_seq = CASE WHEN excluded.read_seq > message_reads.read_seq THEN excluded.read_seq "
               "ELSE message_reads.read_seq END, read_at = excluded.read_at",
               DB_ARGS(DB_TEXT(job_id), DB_TEXT(provider_id), DB_TEXT(reader_role), DB_INT(clock_now_ms()))));
}

err_t messages_store_post(arena *a, const message_new *m, db_res **out) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(jobs_lock_in(c, m->job_id)); /* sent with the insert, which runs after it */
  if (!e)
    e = db_to_err(db_exec(
        c, a, out,
        "INSERT INTO messages (id, job_id, provider_id, sender_id, sender_role, sender_name, content, "
        "created_at, seq) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $10 WHERE "
        "(SELECT COUNT(*) FROM messages WHERE job_id = $2 AND provider_id = $3) < $9 RETURNING " MESSAGE_COLUMNS,
        DB_ARGS(DB_TEXT(m->id), DB_TEXT(m->job_id), DB_TEXT(m->provider_id), DB_TEXT(m->sender_id),
                DB_TEXT(m->sender_role), DB_TEXT(m->sender_name), DB_TEXT(m->content), DB_INT(clock_now_ms()),
                DB_INT(THREAD_CAP), DB_INT(clock_sequence()))));
  if (!e && (*out)->rows) e = db_to_err(announce(c, a, m, *out));
  if (!e && (*out)->rows) e = db_to_err(notify_in_known(c, &m->note, m->push_device != NULL));
  return db_end(c, e);
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const MESSAGES_EXPORT_SQL[1][2] = {
    {"SELECT m.* FROM messages m JOIN jobs j ON j.id = m.job_id WHERE j.customer_id = $1 ORDER BY m.seq",
     "SELECT * FROM messages WHERE provider_id = $1 ORDER BY seq"},
};

#define OF_CUSTOMER "(SELECT id FROM jobs WHERE customer_id = $1)"
/* An account's own messages: a customer writes only in the threads of its jobs (an erasure
 * keeps the jobs), a provider only in its own threads; said so, the read goes through the
 * threads' indexes instead of every message. */
#define SENT_BY_CUSTOMER "job_id IN " OF_CUSTOMER " AND sender_id = $1 AND sender_role = 'user'"
#define SENT_BY_PROVIDER "provider_id = $1 AND sender_id = $1 AND sender_role = 'provider'"
#define ERASED(sent)                                                                                                   \
  "UPDATE messages SET sender_name = '" ACCOUNT_DELETED_NAME "', content = CASE WHEN content LIKE '[IMAGE]%' "         \
  "THEN '[Photo removed]' ELSE content END WHERE " sent
/* $1 = the account's id: [mode][provider]. */
static const char *const forget_sql[][2][2] = {
    [FORGET_ERASE] = {{ERASED(SENT_BY_CUSTOMER)}, {ERASED(SENT_BY_PROVIDER)}},
    [FORGET_DELETE] = {{"DELETE FROM message_reads WHERE job_id IN " OF_CUSTOMER,
                        "DELETE FROM messages WHERE job_id IN " OF_CUSTOMER},
                       {"DELETE FROM message_reads WHERE provider_id = $1",
                        "DELETE FROM messages WHERE provider_id = $1"}},
};
static const char *const photos_sql[] = {
    "SELECT content FROM messages WHERE " SENT_BY_CUSTOMER " AND content LIKE '[IMAGE]%'",
    "SELECT content FROM messages WHERE " SENT_BY_PROVIDER " AND content LIKE '[IMAGE]%'",
};

err_t messages_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  err_t e = mode == FORGET_ERASE ? account_files_in(c, who, photos_sql[who->provider]) : ERR_OK;
  return e ? e : account_exec_in(c, who, forget_sql[mode][who->provider], 2, NULL);
}

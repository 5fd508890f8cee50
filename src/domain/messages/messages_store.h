/* SQL of the message threads (table messages). Internal to the messages domain. */
#ifndef DOMAIN_MESSAGES_MESSAGES_STORE_H
#define DOMAIN_MESSAGES_MESSAGES_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include "domain/notifications/notifications.h"

/* A thread holds at most this many messages. */
#define THREAD_CAP 250
/* The columns of a message row, as every read here returns them. */
#define MESSAGE_COLUMNS "id, sender_id, sender_role, sender_name, content, created_at, seq"

/* The read of the caller's thread on job_id, as one statement: no row when there is no such
 * job, else its id, customer_id, status and provider_id (the assigned one), sender_name (the
 * caller's name when they may use the thread: a customer, role "user", when its provider,
 * `provider` or else the assigned one, quoted on the job or is assigned to it; a provider,
 * caller_id, likewise; NULL otherwise) and counterpart_push_device (one of the other party's push
 * devices, NULL: none). */
db_read messages_read_thread(arena *a, const char *role, const char *caller_id, const char *job_id,
                             const char *provider);
/* A thread's messages oldest first, by (seq, id); every one without paging. */
extern const db_keyset MESSAGES_KEYSET;
/* The same newest first (?order=desc); its cursors are its own (a list of another name). */
extern const db_keyset MESSAGES_DESC_KEYSET;
/* The read of page pg of the (job, provider) thread; provider NULL: the job's assigned one. */
db_read messages_read_list(arena *a, const char *job_id, const char *provider, const db_page *pg);

/* The caller's threads, one row per (job, provider) thread with a message that the caller may
 * still use (the provider quoted on the job or is assigned to it), newest last message first
 * (keyset: last_seq, job_id, provider_id): job_id, provider_id, service, counterpart_id,
 * counterpart_name, the last message's columns (MESSAGE_COLUMNS), last_seq and unread_count
 * (messages of the other side after the caller's read mark). role: "user" (caller_id is the
 * customer) or "provider".
 *
 * A snapshot list (db/page.h): the first page places each thread by its last message and reads
 * the newest message's seq (column snapshot); later pages place each thread by its last message
 * up to that seq, so a message posted while a client pages cannot move its thread past the
 * cursor (the thread stays where the first page's order put it, shown with its newest message),
 * and a thread begun after the first page waits for the next first page. */
/* The order of the threads: the newest last message first, as of the first page. */
extern const db_keyset THREADS_KEYSET;
err_t messages_store_threads(arena *a, const char *role, const char *caller_id, const db_page *pg, db_res **out);
/* Moves the read mark of one side (reader_role "user" or "provider") of the thread to its last
 * message; a mark never moves back. */
err_t messages_store_mark_read(const char *job_id, const char *provider_id, const char *reader_role);

/* A message to post. */
typedef struct message_new {
  const char *id, *job_id, *provider_id, *sender_id, *sender_role, *sender_name, *content;
  const char *customer_id; /* the job's customer: with provider_id, the thread's two parties */
  notice note;             /* the other party's notification */
  const char *push_device; /* one of the other party's push devices, or NULL */
} message_new;
/* Posts m in one transaction that first locks the job's row (the database on SQLite), so
 * concurrent posts count the thread one after another, with its message.created event to both
 * parties and the other party's notification; *out has the new row, or no row when the thread
 * already holds THREAD_CAP messages (nothing posted). */
err_t messages_store_post(arena *a, const message_new *m, db_res **out);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's messages (account_read_in): those of a customer's jobs' threads, or of a
 * provider's threads, oldest first. */
extern const char *const MESSAGES_EXPORT_SQL[1][2];
/* forget_in of the messages and their read marks: an erasure keeps the account's messages (the
 * other side's thread) under ACCOUNT_DELETED_NAME, its photos "[Photo removed]" (their keys
 * appended to who->files); a deletion deletes the threads of a customer's jobs, or a provider's,
 * with their read marks. */
err_t messages_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif

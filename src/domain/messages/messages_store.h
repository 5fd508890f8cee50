/* SQL of the message threads (table messages). Internal to the messages domain. */
#ifndef DOMAIN_MESSAGES_MESSAGES_STORE_H
#define DOMAIN_MESSAGES_MESSAGES_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "http/paging.h"

/* A thread holds at most this many messages. */
#define THREAD_CAP 250
/* The columns of a message row, as every read here returns them. */
#define MESSAGE_COLUMNS "id, sender_id, sender_role, sender_name, content, created_at, seq"

/* The caller's name when they may use the thread of provider_id on job_id: a customer (role
 * "user", caller_id) when that provider quoted on the job or is its assigned one; a provider
 * (caller_id = provider_id) likewise. *out has one row (name) or none. */
err_t messages_store_thread_party(arena *a, const char *role, const char *caller_id, const char *job_id,
                                  const char *provider_id, const char *assigned, db_res **out);
/* A thread's messages oldest first, by (seq, id); every one without paging. */
extern const hs_keyset MESSAGES_KEYSET;
/* The page pg of the (job, provider) thread. */
err_t messages_store_list(arena *a, const char *job_id, const char *provider_id, const hs_page *pg, db_res **out);

/* The caller's threads, one row per (job, provider) thread with a message that the caller may
 * still use (the provider quoted on the job or is assigned to it), newest last message first
 * (keyset: last_seq, job_id, provider_id): job_id, provider_id, service, counterpart_id,
 * counterpart_name, the last message's columns (MESSAGE_COLUMNS), last_seq and unread_count
 * (messages of the other side after the caller's read mark). role: "user" (caller_id is the
 * customer) or "provider". */
/* The order of the threads: the newest last message first. */
extern const hs_keyset THREADS_KEYSET;
err_t messages_store_threads(arena *a, const char *role, const char *caller_id, const hs_page *pg, db_res **out);
/* Moves the read mark of one side (reader_role "user" or "provider") of the thread to its last
 * message; a mark never moves back. */
err_t messages_store_mark_read(const char *job_id, const char *provider_id, const char *reader_role);

/* A message to post. */
typedef struct message_new {
  const char *id, *job_id, *provider_id, *sender_id, *sender_role, *sender_name, *content;
  const char *customer_id; /* the job's customer: with provider_id, the thread's two parties */
} message_new;
/* Posts m in one transaction that first locks the job's row (the database on SQLite), so
 * concurrent posts count the thread one after another, with its message.created event to both
 * parties; *out has the new row, or no row when the thread already holds THREAD_CAP messages
 * (nothing posted). */
err_t messages_store_post(arena *a, const message_new *m, db_res **out);

#endif

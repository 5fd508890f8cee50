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

/* A message to post. */
typedef struct message_new {
  const char *id, *job_id, *provider_id, *sender_id, *sender_role, *sender_name, *content;
} message_new;
/* Posts m in one transaction that first locks the job's row (the database on SQLite), so
 * concurrent posts count the thread one after another; *out has the new row, or no row when
 * the thread already holds THREAD_CAP messages (nothing posted). */
err_t messages_store_post(arena *a, const message_new *m, db_res **out);

#endif

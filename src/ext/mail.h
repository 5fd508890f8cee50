/* Email. Messages are queued (kind "email") in the caller's transaction and delivered by a
 * queue worker: over SMTP with libcurl when SMTP_URL is set, otherwise written as RFC 5322
 * .eml files under $DATA_DIR/mail/ (development and tests read them there). */
#ifndef EXT_MAIL_H
#define EXT_MAIL_H
#include "db/db.h"

/* Queues an email from MAIL_FROM on connection c: body is its text part; its HTML part is
 * rendered from it at delivery (ext/mail_render.h: paragraphs, and a button for each line that
 * is only a link). */
db_rc mail_enqueue(db_conn *c, const char *to, const char *subject, const char *body);
/* Registers the "email" queue handler. */
void mail_init(void);
/* Deletes the .eml files of $DATA_DIR/mail/ written more than keep_ms ago (their modification
 * time, by the real clock: the test clock never ages a file); returns how many. */
int mail_prune_outbox(int64_t keep_ms);

#endif

/* Job message threads: one thread per (job, provider). The customer names the thread with
 * providerId (default: the assigned provider); a provider uses its own thread when it is
 * assigned or has quoted on the job. */
#ifndef DOMAIN_MESSAGES_H
#define DOMAIN_MESSAGES_H
#include "domain/domain.h"
#include "http/rowjson.h"

extern const domain_def messages_domain;

/* The Message JSON of a messages row (`SELECT messages.*` or MESSAGE_COLUMNS) but its
 * content, as a field table (http/rowjson.h); messages_write_members adds the content. */
extern const hs_rj_field MESSAGES_JSON[];
/* Writes the members of message row i of r (MESSAGES_JSON bound as b) into an open object:
 * its content as stored, a photo's storage key as "[IMAGE]<signed URL>" signed now. */
void messages_write_members(arena *a, jw *w, const hs_rj *b, const db_res *r, int i);

#endif

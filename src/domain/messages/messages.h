/* Job message threads: one thread per (job, provider). The customer names the thread with
 * providerId (default: the assigned provider); a provider uses its own thread when it is
 * assigned or has quoted on the job. */
#ifndef DOMAIN_MESSAGES_H
#define DOMAIN_MESSAGES_H
#include "domain/domain.h"
#include "http/rowjson.h"

extern const domain_def messages_domain;

/* The Message JSON of a messages row (`SELECT messages.*` or MESSAGE_COLUMNS), as a field
 * table (http/rowjson.h). */
extern const hs_rj_field MESSAGES_JSON[];

#endif

/* Job message threads: one thread per (job, provider). The customer names the thread with
 * providerId (default: the assigned provider); a provider uses its own thread when it is
 * assigned or has quoted on the job. */
#ifndef DOMAIN_MESSAGES_H
#define DOMAIN_MESSAGES_H
#include "domain/domain.h"

extern const domain_def messages_domain;

#endif

/* Job message threads: one thread per (job, provider). The customer names the thread with
 * providerId (default: the assigned provider); a provider uses its own thread when it is
 * assigned or has quoted on the job. */
#ifndef DOMAIN_MESSAGES_H
#define DOMAIN_MESSAGES_H
#include "http/http.h"

extern const hs_route MESSAGES_ROUTES[];
extern const size_t MESSAGES_ROUTES_LEN;

#endif

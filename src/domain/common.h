/* Vocabulary shared by every domain. */
#ifndef DOMAIN_COMMON_H
#define DOMAIN_COMMON_H

/* The four services, NULL-terminated (F_ENUM choices). */
extern const char *const SERVICE_NAMES[];

#endif

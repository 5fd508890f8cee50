/* The one table of roles: each bit of http.h with the name tokens carry and whether it is a
 * staff role (its tokens carry type "staff"). The guard, the OpenAPI document and the staff
 * domain's role enum all read it. */
#include "http/http.h"
#include <string.h>

static const struct {
  unsigned bit;
  const char *name;
  bool staff;
} ROLES[] = {
    {ROLE_USER, "user", false},
    {ROLE_PROVIDER, "provider", false},
    {ROLE_ADMIN, "admin", false},
    {ROLE_CUSTOMER_SUPPORT, "customer_support", true},
    {ROLE_PROFESSIONAL_SUPPORT, "professional_support", true},
    {ROLE_TECHNICAL_SUPPORT, "technical_support", true},
    {ROLE_INTERNAL_AUDIT, "internal_audit", true},
};
#define NROLES (sizeof ROLES / sizeof ROLES[0])

const char *const HS_ACCOUNT_ROLE_NAMES[] = {"user", "provider", NULL};

const char *const HS_STAFF_ROLE_NAMES[] = {"customer_support", "professional_support", "technical_support",
                                           "internal_audit", NULL};

unsigned hs_role_bit(const char *name, bool staff) {
  for (size_t i = 0; i < NROLES; i++)
    if (ROLES[i].staff == staff && !strcmp(ROLES[i].name, name)) return ROLES[i].bit;
  return 0;
}

const char *hs_role_name(unsigned bit) {
  for (size_t i = 0; i < NROLES; i++)
    if (ROLES[i].bit == bit) return ROLES[i].name;
  return NULL;
}

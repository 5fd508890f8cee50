/* Shared domain vocabulary. */
#include "domain/common.h"
#include <stddef.h>

const char *const SERVICE_NAMES[] = {"lawncare", "snowplowing", "handyman", "home_cleaning", NULL};

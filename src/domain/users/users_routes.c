/* Routes and schemas of /users/me. */
#include "core/util.h"
#include "domain/users/users.h"
#include "domain/users/users_api.h"

static const hs_field update_me_fields[] = {
    {"lat", F_NUMBER, 0, RANGE(-90, 90)},
    {"lng", F_NUMBER, 0, RANGE(-180, 180)},
    {0},
};
static const hs_schema update_me_schema = {update_me_fields};

const hs_route USERS_ROUTES[] = {
    {HS_GET, "/users/me", api_users_me, ROLE_USER, .flags = ROUTE_DB_READ, .summary = "The caller's customer profile"},
    {HS_PATCH, "/users/me", api_users_update_me, ROLE_USER, &update_me_schema,
     .summary = "Update the caller's coordinates"},
};
const size_t USERS_ROUTES_LEN = ARRAY_LEN(USERS_ROUTES);

/* Routes and schemas of /users/me and its premium features (saved addresses: addresses.c). */
#include "core/util.h"
#include "domain/users/users.h"
#include "domain/users/users_api.h"

static const hs_field update_me_fields[] = {
    {"lat", F_NUMBER, 0, RANGE(-90, 90)},
    {"lng", F_NUMBER, 0, RANGE(-180, 180)},
    {0},
};
static const hs_schema update_me_schema = {update_me_fields};

static const hs_field note_fields[] = {{"note", F_STRING, F_REQUIRED, LEN(1, 1000)}, {0}};
static const hs_schema note_schema = {note_fields};
static const hs_field alerts_fields[] = {{"enabled", F_BOOL, F_REQUIRED}, {0}};
static const hs_schema alerts_schema = {alerts_fields};

const hs_route USERS_ROUTES[] = {
    {HS_GET, "/users/me", api_users_me, ROLE_USER, .flags = ROUTE_DB_READ,
     .summary = "The caller's customer profile", .response = "User",
     .errors = "404"},
    {HS_PATCH, "/users/me", api_users_update_me, ROLE_USER, &update_me_schema,
     .summary = "Update the caller's coordinates", .response = "User", .errors = "404"},
    {HS_GET, "/users/me/favorites", api_users_favorites, ROLE_USER, .summary = "Favorite providers (premium)",
     .response = "FavoriteProvider[]"},
    {HS_POST, "/users/me/favorites/:providerId", api_users_add_favorite, ROLE_USER,
     .summary = "Add a favorite provider (premium; idempotent)", .response = "Favorited", .errors = "404"},
    {HS_DELETE, "/users/me/favorites/:providerId", api_users_remove_favorite, ROLE_USER,
     .summary = "Remove a favorite provider", .response = "Favorited"},
    {HS_GET, "/users/me/pro-notes", api_users_pro_notes, ROLE_USER, .summary = "Private notes by provider id",
     .response = "ProNotes"},
    {HS_PUT, "/users/me/pro-notes/:providerId", api_users_set_pro_note, ROLE_USER, &note_schema,
     .summary = "Write the private note on a provider (premium)", .response = "Ok", .errors = "404"},
    {HS_DELETE, "/users/me/pro-notes/:providerId", api_users_delete_pro_note, ROLE_USER,
     .summary = "Delete the private note on a provider", .response = "Ok"},
    {HS_GET, "/users/me/spend-summary", api_users_spend_summary, ROLE_USER,
     .summary = "Year-to-date spending by month, service and provider (premium)", .response = "SpendSummary"},
    {HS_PATCH, "/users/me/seasonal-alerts", api_users_seasonal_alerts, ROLE_USER, &alerts_schema,
     .summary = "Switch seasonal weather alerts (enabling needs premium)", .response = "SeasonalAlerts"},
};
const size_t USERS_ROUTES_LEN = ARRAY_LEN(USERS_ROUTES);

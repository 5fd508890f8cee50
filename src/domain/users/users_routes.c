/* Routes and schemas of /users/me, its saved addresses and its premium features. */
#include "domain/common.h"
#include "domain/users/users_api.h"
#include "ext/filetype.h"
#include "http/paging.h"

#define MB (1024 * 1024)

static const hs_field update_me_fields[] = {
    {"name", F_STRING, 0, LEN(1, 100)},
    {"phone", F_STRING, 0, LEN(0, 20)},
    COMMON_POINT("lat", "lng"),
    {0},
};
static const hs_schema update_me_schema = {update_me_fields};

static const hs_field note_fields[] = {{"note", F_STRING, F_REQUIRED, LEN(1, 1000)}, {0}};
static const hs_schema note_schema = {note_fields};
static const hs_field alerts_fields[] = {{"enabled", F_BOOL, F_REQUIRED}, {0}};
static const hs_schema alerts_schema = {alerts_fields};

static const hs_field create_fields[] = {
    {"label", F_STRING, 0, LEN(0, 100)},
    {"address", F_STRING, F_REQUIRED, LEN(1, 300)},
    {"zip", F_ZIP, F_REQUIRED},
    {0},
};
static const hs_schema create_schema = {create_fields};
static const hs_field update_fields[] = {
    {"drivewayLength", F_NUMBER, 0, RANGE(0, 1e6)},
    {"lawnAcres", F_NUMBER, 0, RANGE(0, 1e6)},
    {0},
};
static const hs_schema update_schema = {update_fields};
static const hs_file_rule photo_files[] = {
    {"streetViewPhoto", 1, 10 * MB, FT_IMAGES}, {"serviceAreaPhotos", 10, 10 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec photo_upload = {photo_files, 1, "No files uploaded"};

const hs_route users_routes[] = {
    {HS_GET, "/users/me", api_users_me, ROLE_USER, .flags = ROUTE_DB_READ, .summary = "The caller's customer profile",
     .response = "User", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PATCH, "/users/me", api_users_update_me, ROLE_USER, &update_me_schema,
     .summary = "Update the caller's name, phone and coordinates", .response = "User", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/users/me/favorites", api_users_favorites, ROLE_USER, .flags = ROUTE_DB_READ, .query = &HS_PAGE_QUERY,
     .summary = "Favorite providers, most recently added first (premium)", .response = "FavoriteProvider[]"},
    {HS_POST, "/users/me/favorites/:providerId", api_users_add_favorite, ROLE_USER,
     .summary = "Add a favorite provider (premium; idempotent)", .response = "Favorited",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/users/me/favorites/:providerId", api_users_remove_favorite, ROLE_USER,
     .summary = "Remove a favorite provider", .response = "Favorited"},
    {HS_GET, "/users/me/pro-notes", api_users_pro_notes, ROLE_USER, .flags = ROUTE_DB_READ,
     .summary = "Private notes by provider id", .response = "ProNotes"},
    {HS_PUT, "/users/me/pro-notes/:providerId", api_users_set_pro_note, ROLE_USER, &note_schema,
     .summary = "Write the private note on a provider (premium)", .response = "Ok", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/users/me/pro-notes/:providerId", api_users_delete_pro_note, ROLE_USER,
     .summary = "Delete the private note on a provider", .response = "Ok"},
    {HS_GET, "/users/me/spend-summary", api_users_spend_summary, ROLE_USER, .flags = ROUTE_DB_READ,
     .summary = "Year-to-date spending by month, service and provider (premium)", .response = "SpendSummary"},
    {HS_PATCH, "/users/me/seasonal-alerts", api_users_seasonal_alerts, ROLE_USER, &alerts_schema,
     .summary = "Switch seasonal weather alerts (enabling needs premium)", .response = "SeasonalAlerts"},
    {HS_GET, "/users/me/addresses", api_addresses_list, ROLE_USER, .flags = ROUTE_DB_READ, .query = &HS_PAGE_QUERY,
     .summary = "Saved addresses, primary first, then in the order they were saved", .response = "UserAddress[]"},
    {HS_POST, "/users/me/addresses", api_addresses_create, ROLE_USER, &create_schema, .ok = 201,
     .summary = "Save an address (free tier: one)", .response = "UserAddress[]"},
    {HS_PATCH, "/users/me/addresses/:id/primary", api_addresses_make_primary, ROLE_USER,
     .summary = "Make an address the primary one", .response = "UserAddress[]", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/users/me/addresses/:id", api_addresses_delete, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Delete a saved address", .response = "UserAddress[]", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PATCH, "/users/me/addresses/:id", api_addresses_update, ROLE_USER, &update_schema,
     .summary = "Set property details (driveway length, lawn acres)", .response = "UserAddress",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/users/me/addresses/:id/photos", api_addresses_add_photos, ROLE_USER, .upload = &photo_upload,
     .summary = "Add street-view and service-area photos", .response = "UserAddress", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/users/me/addresses/:id/photos", api_addresses_clear_photos, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Remove an address's photos", .response = "UserAddress", .errors = ERRORS(ERR_NOT_FOUND)},
    {0},
};

/* Routes, body schemas and upload rules of /providers/me. Upload limits follow the
 * specification's section 8. */
#include "core/util.h"
#include "domain/common.h"
#include "domain/providers/providers.h"
#include "domain/providers/providers_api.h"
#include "ext/filetype.h"
#include "http/paging.h"

#define MB (1024 * 1024)

static const hs_field update_fields[] = {
    {"name", F_STRING, 0, LEN(1, 100)},        {"phone", F_STRING, 0, LEN(0, 20)},       COMMON_PROVIDER_LISTS(0),
    {"companyName", F_STRING, 0, LEN(0, 100)}, {"companyUrl", F_STRING, 0, LEN(0, 300)}, {0},
};
static const hs_schema update_schema = {update_fields};

static const hs_file_rule logo_files[] = {{"logo", 1, 5 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec logo_upload = {logo_files, 1, "No file uploaded"};
static const hs_file_rule headshot_files[] = {{"headshot", 1, 8 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec headshot_upload = {headshot_files, 1, "No file uploaded"};
static const hs_file_rule id_files[] = {{"front", 1, 10 * MB, FT_IMAGES}, {"back", 1, 10 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec id_upload = {id_files, 1, "No file uploaded: send front and/or back"};
static const hs_file_rule insurance_files[] = {{"insuranceDoc", 1, 10 * MB, FT_PNG | FT_JPEG | FT_PDF}, {0}};
static const hs_upload_spec insurance_upload = {insurance_files, 1, "No file uploaded"};

/* PUT /providers/me/availability: { availability: { mon: { start, end, on }, ... } } */
static const hs_field day_fields[] = {
    {"start", F_TIME, F_REQUIRED},
    {"end", F_TIME, F_REQUIRED},
    {"on", F_BOOL, F_REQUIRED},
    {0},
};
static const hs_schema day_schema = {day_fields};
static const hs_field week_fields[] = {
    {"mon", F_OBJECT, .object = &day_schema}, {"tue", F_OBJECT, .object = &day_schema},
    {"wed", F_OBJECT, .object = &day_schema}, {"thu", F_OBJECT, .object = &day_schema},
    {"fri", F_OBJECT, .object = &day_schema}, {"sat", F_OBJECT, .object = &day_schema},
    {"sun", F_OBJECT, .object = &day_schema}, {0},
};
static const hs_schema week_schema = {week_fields};
static const hs_field availability_fields[] = {{"availability", F_OBJECT, F_REQUIRED, .object = &week_schema}, {0}};
static const hs_schema availability_schema = {availability_fields};

/* POST /providers/me/smart-bundles/accept: { jobs: [{ jobId, amount }] } */
static const hs_field bundle_job_fields[] = {
    {"jobId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"amount", F_NUMBER, F_REQUIRED},
    {0},
};
static const hs_schema bundle_job_schema = {bundle_job_fields};
static const hs_field bundle_job = {"jobs", F_OBJECT, .object = &bundle_job_schema};
static const hs_field bundle_fields[] = {{"jobs", F_ARRAY, F_REQUIRED, LEN(1, 50), .item = &bundle_job}, {0}};
static const hs_schema bundle_schema = {bundle_fields};

const hs_route providers_routes[] = {
    {HS_GET, "/providers/me", api_providers_me, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .summary = "The caller's provider profile", .response = "Provider", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PATCH, "/providers/me", api_providers_update_me, ROLE_PROVIDER, &update_schema,
     .summary = "Update profile fields (insuranceInfo is not settable)", .response = "Provider",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/logo", api_providers_upload_logo, ROLE_PROVIDER, .upload = &logo_upload,
     .summary = "Upload the company logo (replaces the previous one)", .response = "LogoUpload",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/headshots", api_providers_add_headshot, ROLE_PROVIDER, .upload = &headshot_upload,
     .summary = "Add a headshot", .response = "Provider", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_DELETE, "/providers/me/headshots/:index", api_providers_delete_headshot, ROLE_PROVIDER, .flags = ROUTE_SLOW,
     .summary = "Remove the headshot at a zero-based position", .response = "Provider",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/id-documents", api_providers_upload_id_documents, ROLE_PROVIDER, .upload = &id_upload,
     .summary = "Upload driver's licence images (front and/or back); recognition follows", .response = "Provider",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/insurance-document", api_providers_upload_insurance, ROLE_PROVIDER,
     .upload = &insurance_upload, .summary = "Upload the insurance certificate; recognition follows",
     .response = "InsuranceUpload", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/jobs", api_providers_jobs, ROLE_PROVIDER, .flags = ROUTE_DB_READ, .query = &HS_PAGE_QUERY,
     .summary = "Every job assigned to the provider, preferredAt ascending", .response = "Job[]"},
    {HS_GET, "/providers/me/schedule", api_providers_schedule, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .query = &HS_PAGE_QUERY, .summary = "Accepted and running jobs with the accepted quote's time and amount",
     .response = "ScheduleItem[]"},
    {HS_GET, "/providers/me/availability", api_providers_availability, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .summary = "The weekly schedule (default Monday to Friday 08:00-17:00)", .response = "Availability",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PUT, "/providers/me/availability", api_providers_set_availability, ROLE_PROVIDER, &availability_schema,
     .summary = "Replace the weekly schedule", .response = "Availability", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/insights", api_providers_insights, ROLE_PROVIDER,
     .summary = "Ratings, income, pending income, membership fee, recent reviews", .response = "ProviderInsights",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/providers/me/premium-insights", api_providers_premium_insights, ROLE_PROVIDER,
     .summary = "Preferred Pro analytics: expansion, pricing, lost bids, insurance", .response = "PremiumInsights",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/preferred-pro/apply", api_providers_preferred_pro, ROLE_PROVIDER,
     .summary = "Join Preferred Pro (isPremium from now), or keep a cancelled membership going",
     .response = "PreferredProWelcome", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/preferred-pro/cancel", api_providers_preferred_pro_cancel, ROLE_PROVIDER,
     .summary = "End Preferred Pro at the end of this month (no fee for later months)",
     .response = "PreferredProCancellation", .errors = ERRORS(ERR_CONFLICT)},
    {HS_GET, "/providers/me/smart-bundles", api_providers_bundles, ROLE_PROVIDER,
     .summary = "Up to 3 day routes of open jobs over the next 7 days", .response = "Bundle[]"},
    {HS_POST, "/providers/me/smart-bundles/accept", api_providers_accept_bundle, ROLE_PROVIDER, &bundle_schema,
     .summary = "Quote several jobs at once (amounts clamped to 25-500)", .response = "BundleAcceptance"},
    {HS_GET, "/providers/:id/profile", api_providers_public_profile, ROLE_ANY, .query = &HS_PAGE_QUERY,
     .flags = ROUTE_DB_READ, .summary = "A provider's public profile with its newest reviews (20, or a page of them)",
     .response = "ProviderProfile", .errors = ERRORS(ERR_NOT_FOUND)},
    {0},
};

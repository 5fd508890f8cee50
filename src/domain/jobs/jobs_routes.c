/* Routes, schemas and upload rules of /jobs/... and POST /reviews. */
#include "core/util.h"
#include "domain/common.h"
#include "domain/jobs/jobs.h"
#include "domain/jobs/jobs_api.h"
#include "ext/filetype.h"
#include "http/paging.h"

#define MB (1024 * 1024)

static const hs_field list_fields[] = {{"status", F_ENUM, F_CSV, .choices = JOB_STATUS_NAMES}, HS_PAGE_FIELDS, {0}};
static const hs_schema list_query = {list_fields};

static const hs_field create_fields[] = {
    {"service", F_ENUM, F_REQUIRED, .choices = SERVICE_NAMES},
    {"description", F_STRING, 0, LEN(0, 2000)},
    {"preferredAt", F_DATETIME, .required_unless = "isAsap"},
    {"details", F_OBJECT},
    {"addressId", F_STRING, 0, LEN(1, 64)},
    {"isAsap", F_BOOL},
    {0},
};
static const hs_schema create_schema = {create_fields};

static const char *const STEP_STATUSES[] = {"ON_THE_WAY", "IN_PROGRESS", "COMPLETED", NULL};
static const hs_field status_fields[] = {
    {"status", F_ENUM, F_REQUIRED, .choices = STEP_STATUSES},
    COMMON_POINT("fromLat", "fromLng"),
    {0},
};
static const hs_schema status_schema = {status_fields};

static const hs_field report_fields[] = {{"description", F_STRING, F_REQUIRED, LEN(1, 5000)}, {0}};
static const hs_schema report_schema = {report_fields};

static const hs_field tip_fields[] = {{"amount", F_NUMBER, F_REQUIRED, RANGE(1, 25)}, {0}};
static const hs_schema tip_schema = {tip_fields};

static const char *const TIME_SLOTS[] = {"morning", "afternoon", "evening", NULL};
static const hs_field recurring_fields[] = {
    {"dayOfWeek", F_INT, F_REQUIRED, RANGE(0, 6)},
    {"timeSlot", F_ENUM, F_REQUIRED, .choices = TIME_SLOTS},
    {"endDate", F_DATETIME, F_REQUIRED},
    {0},
};
static const hs_schema recurring_schema = {recurring_fields};

static const hs_field review_fields[] = {
    {"jobId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"rating", F_INT, F_REQUIRED, RANGE(1, 5)},
    {"comment", F_STRING, 0, LEN(0, 2000)},
    {0},
};
static const hs_schema review_schema = {review_fields};

static const hs_file_rule step_files[] = {{"images", 10, 10 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec step_upload = {step_files, 1, "No photos uploaded: send 1 to 10 images"};
static const hs_file_rule job_files[] = {{"images", 5, 10 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec job_upload = {job_files, 1, "No files uploaded"};

const hs_route jobs_routes[] = {
    {HS_GET, "/jobs", api_jobs_list, ROLE_USER | ROLE_PROVIDER, .query = &list_query, .flags = ROUTE_DB_READ,
     .summary = "A customer's own jobs (newest first), or a provider's matching open feed (ASAP first, then by "
                "preferredAt); status=A,B filters, limit and cursor page",
     .response = "JobList"},
    {HS_POST, "/jobs", api_jobs_create, ROLE_USER, &create_schema, .ok = 201, .summary = "Post a job",
     .response = "Job", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/jobs/reportable", api_jobs_reportable, ROLE_USER, .query = &HS_PAGE_QUERY, .flags = ROUTE_DB_READ,
     .summary = "Completed jobs that can still be reported (72 hours)", .response = "ReportableJob[]"},
    {HS_GET, "/jobs/:id", api_jobs_get, ROLE_USER | ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .summary = "A job with customer, provider, quotes", .response = "JobDetail", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/cancel", api_jobs_cancel, ROLE_USER, .flags = ROUTE_SLOW, .summary = "Cancel a job",
     .response = "Job", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_PATCH, "/jobs/:id/status", api_jobs_set_status, ROLE_PROVIDER, &status_schema, .flags = ROUTE_SLOW,
     .summary = "Move an assigned job one step", .response = "Job", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/start", api_jobs_start, ROLE_PROVIDER, .upload = &step_upload,
     .summary = "Start with before photos", .response = "Job", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {HS_POST, "/jobs/:id/complete", api_jobs_complete, ROLE_PROVIDER, .upload = &step_upload,
     .summary = "Complete with after photos (captures the payment)", .response = "Job",
     .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {HS_POST, "/jobs/:id/images", api_jobs_images, ROLE_USER, .upload = &job_upload, .summary = "Add photos to a job",
     .response = "JobImages", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/report", api_jobs_report, ROLE_USER, &report_schema, .ok = 201,
     .summary = "Report a completed job (within 72 hours)", .response = "JobReport", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/tip", api_jobs_tip, ROLE_USER, &tip_schema, .flags = ROUTE_SLOW, .summary = "Tip the provider",
     .response = "Tip", .errors = ERRORS(ERR_PAYMENT_REQUIRED, ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/recurring", api_jobs_recurring, ROLE_USER, &recurring_schema,
     .summary = "Ask the provider to repeat the job", .response = "RecurringRequested",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/reviews", api_reviews_create, ROLE_USER, &review_schema, .ok = 201, .summary = "Review a job",
     .response = "Review", .errors = ERRORS(ERR_NOT_FOUND)},
    {0},
};

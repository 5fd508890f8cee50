/* Routes and schemas of the message threads (/jobs/:id/messages). */
#include "domain/messages/messages_api.h"
#include "ext/filetype.h"
#include "http/paging.h"

static const hs_field post_fields[] = {
    {"content", F_STRING, F_REQUIRED, LEN(1, 2000)},
    {"providerId", F_STRING, 0, LEN(1, 64)},
    {0},
};
static const hs_schema post_schema = {post_fields};
static const hs_field thread_fields[] = {{"providerId", F_STRING, 0, LEN(1, 64)}, {0}};
static const hs_schema thread_query = {thread_fields};
static const hs_schema thread_body = {thread_fields};
static const char *const ORDERS[] = {"asc", "desc", NULL};
static const hs_field list_fields[] = {
    {"providerId", F_STRING, 0, LEN(1, 64)}, {"order", F_ENUM, .choices = ORDERS}, HS_PAGE_FIELDS, {0}};
static const hs_schema list_query = {list_fields};
static const hs_file_rule photo_files[] = {{"photo", 1, 10 * 1024 * 1024, FT_IMAGES}, {0}};
static const hs_upload_spec photo_upload = {photo_files, 1, "No file uploaded", &thread_query};

const hs_route messages_routes[] = {
    {HS_GET, "/jobs/:id/messages", api_messages_list, ROLE_USER | ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .query = &list_query,
     .summary = "A job's message thread, oldest first or with order=desc newest first (paged with limit and cursor)",
     .response = "MessageList", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/jobs/:id/messages", api_messages_post, ROLE_USER | ROLE_PROVIDER, &post_schema, .ok = 201,
     .summary = "Post a message", .response = "Message", .errors = ERRORS(ERR_NOT_FOUND, ERR_RATE_LIMITED)},
    {HS_POST, "/jobs/:id/messages/photo", api_messages_photo, ROLE_USER | ROLE_PROVIDER, .upload = &photo_upload,
     .ok = 201, .summary = "Post a photo message", .response = "Message",
     .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT, ERR_RATE_LIMITED)},
    {HS_POST, "/jobs/:id/messages/read", api_messages_read, ROLE_USER | ROLE_PROVIDER, &thread_body,
     .summary = "Mark the caller's side of a thread read", .response = "Ok", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/users/me/threads", api_messages_threads, ROLE_USER, .flags = ROUTE_DB_READ, .query = &HS_PAGE_QUERY,
     .summary = "The customer's message threads with unread counts, newest first", .response = "MessageThread[]"},
    {HS_GET, "/providers/me/threads", api_messages_threads, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .query = &HS_PAGE_QUERY, .summary = "The provider's message threads with unread counts, newest first",
     .response = "MessageThread[]"},
    {0},
};

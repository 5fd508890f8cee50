/* Paging of list answers, the HTTP side, once for every list: `?limit=` and `?cursor=` in the
 * route's query schema (HS_PAGE_FIELDS), the cursors, and the next page's link. The statements
 * are db/page.h's: a handler starts with hs_page_begin, which reads the two arguments into a
 * db_page; its store completes the list's statement with db_page_sql; the handler ends with
 * hs_page_end, which drops the row read past the page and announces the next page: the
 * answer's `Link: <URL>; rel="next"` (RFC 8288: this request's URL under PUBLIC_URL, its query
 * as the route's schema parsed it, and the new cursor) and pg->next for answers that wrap their
 * list (`nextCursor`, hs_page_jw_next).
 *
 * Without `limit` or `cursor` a list answers what it answered before paging existed (its own
 * cap, or every row) and announces no next page. A cursor without `limit` continues in pages
 * of HS_PAGE_MAX.
 *
 * A cursor is base64url of the JSON array of the last row's key, "." and a MAC (HMAC-SHA256
 * under a key derived from JWT_SECRET, 128 bits in hex) over the list's name, the request's
 * path and scope, the caller's role and id and that array: one that was forged, edited, made by another
 * list (or another job's thread) or for another account answers 400 `cursor: is not valid`. */
#ifndef HTTP_PAGING_H
#define HTTP_PAGING_H
#include "core/jw.h"
#include "db/page.h"
#include "http/http.h"

#define HS_PAGE_MAX 100

/* The two query fields of every paged list, in its route's query schema. */
#define HS_PAGE_FIELDS                                                                                                 \
  {"limit", F_INT, 0, RANGE(1, HS_PAGE_MAX), .message = "must be an integer from 1 to 100"}, {                         \
    "cursor", F_STRING, 0, LEN(1, 1024), .message = "is not valid"                                                     \
  }

/* The query schema of a list that takes nothing but the two. */
extern const hs_schema HS_PAGE_QUERY;

/* Starts the request's page of the list ks: `limit` and `cursor` from the validated query;
 * scope: what tells this list from others of its kind at the same path (a customer's choice of
 * thread), or NULL; cap: the rows the list answers when neither is given (0: every row). A
 * cursor that is not one this list made for this caller at this path and scope fails the
 * request (400 `cursor: is not valid`, returned). */
err_t hs_page_begin(hs_req *req, const db_keyset *ks, const char *scope, int cap, db_page *pg);
/* After the page's rows were read into r (in the list's order): on a paged request with more
 * rows than the page holds, cuts r to the page and announces the next one, after its last
 * row (Link header, pg->next). ERR_INTERNAL (the request failed) when r lacks the key's
 * columns or holds NULL in one: the list's statement is wrong. */
err_t hs_page_end(hs_req *req, db_page *pg, db_res *r);
/* A store's list of one subject's rows (an account's, or those a filter picks: NULL for all),
 * as the page pg asks for. */
typedef err_t (*hs_page_read)(arena *a, const char *subject, const db_page *pg, db_res **out);
/* The request's page of list ks in *r: hs_page_begin (no scope), the rows read(subject), then
 * hs_page_end. */
err_t hs_page_rows(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject, db_page *pg,
                   db_res **r);
/* Writes a page's rows r into an answer's array (its brackets are the caller's); a failure is
 * returned, the request then failed. */
typedef err_t (*hs_page_writer)(hs_req *req, jw *w, const db_res *r);
/* Answers the request's page of list ks (hs_page_rows) as a JSON array that write fills;
 * row_hint: about how many bytes a row takes. */
err_t hs_ok_page_jw(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject,
                    hs_page_writer write, size_t row_hint);
/* The same announcement for rows the caller merged itself: the next page starts after row
 * `row` of r (whose columns hold the keyset's). */
err_t hs_page_next_after(hs_req *req, db_page *pg, const db_res *r, int row);
/* A wrapped answer's `"nextCursor": "..."` member, when there is a next page. */
void hs_page_jw_next(jw *w, const db_page *pg);

#endif

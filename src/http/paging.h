/* Paging of list answers, once for every list: `?limit=` and `?cursor=` in the route's query
 * schema (HS_PAGE_FIELDS), keyset cursors, the statement's tail, and the next page's link.
 *
 * A list names its order once, as a keyset (hs_keyset: the columns or expressions it sorts by,
 * each ascending or descending, the last one unique). A handler starts with hs_page_begin,
 * which reads the two arguments; its store completes the list's statement with hs_page_sql,
 * which adds the condition "after the cursor's row" (a row-value comparison, or its expanded
 * form when the directions are mixed), the ORDER BY and the LIMIT; the handler ends with
 * hs_page_end, which drops the row read past the page and announces the next page: the
 * answer's `Link: <URL>; rel="next"` (RFC 8288: this request's URL under PUBLIC_URL with the
 * new cursor) and pg->next for answers that wrap their list (`nextCursor`, hs_page_jw_next).
 * Rows inserted meanwhile never make a page repeat or skip a row: each page starts after the
 * last row of the one before, whatever came before it.
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
#include "db/db.h"
#include "http/http.h"

#define HS_PAGE_MAX 100
#define HS_PAGE_MAX_KEY 4
/* The size of an argument array for a list statement of n arguments (hs_page_sql adds some). */
#define HS_PAGE_ARGS(n) ((n) + HS_PAGE_MAX_KEY + 1)

/* The two query fields of every paged list, in its route's query schema. */
#define HS_PAGE_FIELDS                                                                                                 \
  {"limit", F_INT, 0, RANGE(1, HS_PAGE_MAX), .message = "must be an integer from 1 to 100"}, {                         \
    "cursor", F_STRING, 0, LEN(1, 1024), .message = "is not valid"                                                     \
  }

/* The query schema of a list that takes nothing but the two. */
extern const hs_schema HS_PAGE_QUERY;

/* One element of a list's order. */
typedef struct hs_key_part {
  const char *sql;    /* the column or expression in the statement ("seq", "j.updated_at") */
  const char *column; /* the result column that holds it for each row */
  char type;          /* 'i' integer, 's' text */
  bool desc;          /* descending */
} hs_key_part;

/* A list's order: its name (in its cursors) and its key, the last part unique. */
typedef struct hs_keyset {
  const char *list;
  hs_key_part parts[HS_PAGE_MAX_KEY + 1]; /* ended by a part with sql NULL */
} hs_keyset;

/* One request's page of a list. */
typedef struct hs_page {
  const hs_keyset *ks;
  const char *scope;           /* which list of its kind, beyond the path (a job's thread), or NULL */
  int limit;                   /* the page's size; 0: not paged (the list's answer before paging) */
  int fetch;                   /* rows to read: limit + 1, or the list's cap (0: every row) */
  int nkey;                    /* 0 on the first page, else the parts of key */
  db_val key[HS_PAGE_MAX_KEY]; /* the last row of the page before (text in the request's arena) */
  const char *next;            /* after hs_page_end: the next page's cursor, or NULL */
} hs_page;

/* Every row of the list ks, in its order (for a caller that needs the whole list). */
#define HS_PAGE_ALL(keyset) (&(const hs_page){.ks = (keyset)})

/* Starts the request's page of the list ks: `limit` and `cursor` from the validated query;
 * scope: what tells this list from others of its kind at the same path (a customer's choice of
 * thread), or NULL; cap: the rows the list answers when neither is given (0: every row). A
 * cursor that is not one this list made for this caller at this path and scope fails the
 * request (400 `cursor: is not valid`, returned). */
err_t hs_page_begin(hs_req *req, const hs_keyset *ks, const char *scope, int cap, hs_page *pg);
/* The list's statement completed for the page: sql (a SELECT ending inside its WHERE clause,
 * whose last parameter is $*n) + " AND <after the cursor's row>" + " ORDER BY <key>" +
 * " LIMIT <fetch>", the values appended to args (HS_PAGE_ARGS(*n) long) and *n
 * moved on. Text in arena a. */
const char *hs_page_sql(arena *a, const hs_page *pg, const char *sql, db_val *args, int *n);
/* Runs the list's statement sql completed for the page pg (hs_page_sql; its first n arguments
 * in args, HS_PAGE_ARGS(n) long) on a connection of its own (db_query): the rows in *out, in a. */
db_rc hs_page_query(arena *a, const hs_page *pg, const char *sql, db_val *args, int n, db_res **out);
/* After the page's rows were read into r (in the list's order): on a paged request with more
 * rows than the page holds, cuts r to the page and announces the next one, after its last
 * row (Link header, pg->next). ERR_INTERNAL (the request failed) when r lacks the key's
 * columns or holds NULL in one: the list's statement is wrong. */
err_t hs_page_end(hs_req *req, hs_page *pg, db_res *r);
/* The same announcement for rows the caller merged itself: the next page starts after row
 * `row` of r (whose columns hold the keyset's). */
err_t hs_page_next_after(hs_req *req, hs_page *pg, const db_res *r, int row);
/* A wrapped answer's `"nextCursor": "..."` member, when there is a next page. */
void hs_page_jw_next(jw *w, const hs_page *pg);

#endif

/* Keyset paging on the database's side: a list's order (db_keyset), one request's page of it
 * (db_page), and its statement completed for the page. The HTTP side (`?limit=`, `?cursor=`,
 * the MAC of a cursor, the Link header) is http/paging.h, which fills a db_page from a request;
 * stores take the db_page and never see HTTP.
 *
 * A list names its order once, as a keyset: the columns or expressions it sorts by, each
 * ascending or descending, the last one unique. db_page_sql adds to the list's statement the
 * condition "after the cursor's row" (a row-value comparison, or its expanded form when the
 * directions are mixed), the ORDER BY and the LIMIT. A page reads one row more than it answers:
 * that row's presence is the next page's. Rows inserted meanwhile never make a page repeat or
 * skip a row: each page starts after the last row of the one before. */
#ifndef DB_PAGE_H
#define DB_PAGE_H
#include "db/db.h"

#define DB_PAGE_MAX_KEY 4
/* The size of an argument array for a list statement of n arguments (db_page_sql adds some). */
#define DB_PAGE_ARGS(n) ((n) + DB_PAGE_MAX_KEY + 1)

/* One element of a list's order. */
typedef struct db_key_part {
  const char *sql;    /* the column or expression in the statement ("seq", "j.updated_at") */
  const char *column; /* the result column that holds it for each row */
  char type;          /* 'i' integer, 's' text */
  bool desc;          /* descending */
} db_key_part;

/* A list's order: its name (in its cursors) and its key, the last part unique.
 *
 * A list whose rows move when they change (threads ordered by their last message) names a
 * snapshot column: an integer bound that its first page reads (each row holds it: the newest
 * position the page saw) and that every later page carries in its cursor (db_page.snapshot), so
 * the store orders later pages by each row's position as of the first page and a change made
 * meanwhile cannot move a row past the cursor. */
typedef struct db_keyset {
  const char *list;
  db_key_part parts[DB_PAGE_MAX_KEY + 1]; /* ended by a part with sql NULL */
  const char *snapshot;                   /* the snapshot's result column, or NULL */
} db_keyset;

/* One request's page of a list. */
typedef struct db_page {
  const db_keyset *ks;
  const char *scope;           /* which list of its kind, beyond the path (a job's thread), or NULL */
  int limit;                   /* the page's size; 0: not paged (the list's answer before paging) */
  int fetch;                   /* rows to read: limit + 1, or the list's cap (0: every row) */
  int nkey;                    /* 0 on the first page, else the parts of key */
  db_val key[DB_PAGE_MAX_KEY]; /* the last row of the page before (text in the request's arena) */
  int64_t snapshot;            /* a snapshot list's bound from its first page; 0 on the first page */
  const char *next;            /* once the page is read: the next page's cursor, or NULL */
} db_page;

/* Every row of the list ks, in its order (for a caller that needs the whole list). */
#define DB_PAGE_ALL(keyset) (&(const db_page){.ks = (keyset)})

/* The parts of ks's key. */
int db_keyset_parts(const db_keyset *ks);
/* The list's statement completed for the page: sql (a SELECT ending inside its WHERE clause,
 * whose last parameter is $*n) + " AND <after the cursor's row>" + " ORDER BY <key>" +
 * " LIMIT <fetch>", the values appended to args (DB_PAGE_ARGS(*n) long) and *n moved on. Text
 * in arena a. The cursor's values are bound as parameters, never written into the statement. */
const char *db_page_sql(arena *a, const db_page *pg, const char *sql, db_val *args, int *n);
/* Runs the list's statement sql completed for the page pg (its first n arguments in args,
 * DB_PAGE_ARGS(n) long) on a connection of its own (db_query): the rows in *out, in a. */
db_rc db_page_query(arena *a, const db_page *pg, const char *sql, db_val *args, int n, db_res **out);
/* db_page_query of a list whose statement takes one text argument ($1): subject (an
 * account's id, a filter). */
err_t db_page_rows(arena *a, const db_page *pg, const char *sql, const char *subject, db_res **out);
/* The same statement as a read for db_exec_all or db_query_all (db_read_make), to run with others. */
db_read db_page_read(arena *a, const db_page *pg, const char *sql, db_val *args, int n);

#endif

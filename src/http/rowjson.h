/* Answers built from result rows, declared as tables (lwan-style descriptors): each field of
 * a JSON object names the column it comes from and how the cell is written. Column positions
 * are resolved once per result (hs_rj_bind), then every row is written straight into the
 * answer's writer. A column missing from the result writes null. */
#ifndef HTTP_ROWJSON_H
#define HTTP_ROWJSON_H
#include "core/jw.h"
#include "db/db.h"
#include "http/http.h"
#include "http/paging.h"

typedef enum {
  RJ_STR,        /* string (null for NULL) */
  RJ_INT,        /* integer */
  RJ_REAL,       /* number */
  RJ_BOOL,       /* "1" -> true, else false (also for NULL) */
  RJ_MONEY,      /* integer cents -> dollars */
  RJ_ISO,        /* epoch ms -> ISO 8601 timestamp */
  RJ_JSON,       /* stored JSON text, copied as it is */
  RJ_JSON_CLEAN, /* stored JSON text printed as jansson prints it (null when not JSON): for text
                    from before it was stored in that form, at write time, not per read */
  RJ_URL,        /* storage key -> signed URL, one-year (photo) lifetime */
  RJ_URLS,       /* JSON array of storage keys -> array of signed photo URLs ([] for NULL) */
  RJ_URL_DOC,    /* storage key -> signed URL, 15-minute (document) lifetime */
  RJ_LIST,       /* stored JSON text, copied as it is ([] for NULL) */
  RJ_FN,         /* written by the field's own function (.write) from the cell and its row */
  RJ_OBJECT,     /* a nested object: the field's own table (.fields) over the columns named
                    column + its columns (a joined row's aliased columns, "staff_" + "name") */
  RJ_INCLUDE,    /* the members of another table (.fields; column: a prefix, "" for none) in
                    place, so a shape that extends another names it instead of repeating it */
} hs_rj_kind;

typedef struct hs_rj_field {
  const char *key;    /* the JSON member */
  const char *column; /* the result column (RJ_OBJECT: the prefix of its columns) */
  hs_rj_kind kind;
  const struct hs_rj_field *fields;                                 /* RJ_OBJECT: the nested object's fields */
  void (*write)(jw *w, const db_res *r, int row, const char *cell); /* RJ_FN */
} hs_rj_field;

/* A field table bound to one result's columns. */
typedef struct hs_rj {
  const hs_rj_field *fields; /* terminated by a row with key == NULL */
  int n;
  int *col;
  struct hs_rj **sub; /* RJ_OBJECT and RJ_INCLUDE fields' own bindings (NULL for the others) */
} hs_rj;

/* Resolves fields (NULL-key terminated) against r's column names, in arena a. */
hs_rj *hs_rj_bind(arena *a, const hs_rj_field *fields, const db_res *r);
/* The same against columns named prefix + column (a joined table's aliased columns). */
hs_rj *hs_rj_bind_as(arena *a, const hs_rj_field *fields, const db_res *r, const char *prefix);
/* Writes the members of row (no braces), so a caller may add its own before closing. A table
 * with link fields (RJ_URL, RJ_URLS, RJ_URL_DOC) also writes `variants` after them when one of
 * its images has variants: each original's link to them (ext/storage.h, storage_variants_open). */
void hs_rj_members(jw *w, const hs_rj *b, const db_res *r, int row);
/* Opens member key as an object holding row's members; the caller adds its own and closes it
 * (jw_obj_end). */
void hs_rj_open(jw *w, const char *key, const hs_rj *b, const db_res *r, int row);
/* Writes row as one object. */
void hs_rj_object(jw *w, const hs_rj *b, const db_res *r, int row);
/* Writes every row of r as an array of objects. */
void hs_rj_array(jw *w, arena *a, const hs_rj_field *fields, const db_res *r);
/* Answers (the route's success status) every row of r as an array of objects; row_hint: about
 * how many bytes a row takes. */
err_t hs_ok_rows(hs_req *req, const hs_rj_field *fields, const db_res *r, size_t row_hint);
/* Answers (the route's success status) the first row of r as one object. */
err_t hs_ok_row(hs_req *req, const hs_rj_field *fields, const db_res *r);
/* Answers the request's page of list ks (hs_page_rows: read(subject) of at most cap rows
 * when not paged) as hs_ok_rows does. */
err_t hs_ok_page(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject,
                 const hs_rj_field *fields, size_t row_hint);
/* Writes one cell (len bytes, NULL for SQL NULL) as kind. */
void hs_rj_cell(jw *w, hs_rj_kind kind, const char *cell, size_t len);

#endif

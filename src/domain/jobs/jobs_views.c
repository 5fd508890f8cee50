/* The read side of /jobs: the customer's list, the provider feed, GET /jobs/:id and the
 * reportable list, all written with the JSON writer from the Job JSON stored with each job
 * (shapes.h): a job costs a copy of its stored parts, its signed photo URLs when it has
 * photos, and the viewer's own members. Rows whose stored parts are missing are rendered from
 * their columns, and their repair is queued (at most one request per process per interval);
 * the answer is the same either way.
 *
 * The feed's parts (one per service and ZIP) arrive each in feed order and are merged
 * here by (feed_at, seq); `quoted` comes from the provider's pending quotes read once. */
#include "core/clock.h"
#include "core/log.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/jobs/feed_cache.h"
#include "domain/jobs/jobs.h"
#include "domain/jobs/jobs_api.h"
#include "domain/jobs/jobs_store.h"
#include "domain/payments/payments.h"
#include "domain/shapes.h"
#include "ext/queue.h"
#include "http/paging.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FEED_MAX 500
#define REPAIR_EVERY_MS 1000
#define REPAIR_MAX 500

/* ---- repair of missing stored JSON ---- */

bool jobs_repair_json(json_t *payload, char err[256]) {
  json_t *ids = json_object_get(payload, "ids");
  size_t n = json_array_size(ids);
  const char **list = calloc(n ? n : 1, sizeof *list);
  for (size_t i = 0; i < n; i++) list[i] = json_string_value(json_array_get(ids, i));
  err_t e = jobs_store_repair_json(list, (int)n);
  free(list);
  if (e != ERR_OK) snprintf(err, 256, "writing the stored JSON of %zu jobs failed", n);
  return e == ERR_OK;
}

/* Daily: reports kept past their customer's account for the dispute window go once it is over. */
bool jobs_prune_reports(json_t *payload, char err[256]) {
  (void)payload;
  if (jobs_store_prune_reports(clock_now_ms()) == ERR_OK) return true;
  snprintf(err, 256, "cannot delete the reports whose time is over");
  return false;
}

void jobs_domain_stop(void) { feed_cache_clear(); }

/* Queues the repair of the listed jobs, each at most once a second by this process (the rows
 * are rendered from their columns meanwhile, so a skipped request costs only time). */
static void request_repair(const char *const *ids, int n) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    uint64_t hash;
    int64_t at;
  } recent[1024];
  if (n == 0) return;
  int64_t now = clock_mono_ms();
  json_t *list = NULL;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < n && i < REPAIR_MAX; i++) {
    uint64_t h = fnv1a(FNV1A_BASIS, ids[i]);
    size_t slot = (size_t)(h % 1024);
    if (recent[slot].hash == h && now - recent[slot].at < REPAIR_EVERY_MS) continue;
    recent[slot].hash = h, recent[slot].at = now;
    if (!list) list = json_array();
    json_array_append_new(list, json_string(ids[i]));
  }
  pthread_mutex_unlock(&mu);
  if (list) queue_defer("jobs_json", json_pack("{s:o}", "ids", list)); /* this thread may not write (ROUTE_DB_READ) */
}

/* Writes the Job JSON of row r[row] (left open). When its stored parts are missing and r
 * lacks the columns to render them, the full row is read; its id joins the repair list. */
static err_t open_job(hs_req *req, jw *w, shape_jobs *b, const db_res *r, int row, const char ***missing,
                      int *nmissing) {
  if (shape_job_missing(b, r, row)) {
    if (!*missing) *missing = arena_alloc(&req->arena, sizeof **missing * FEED_MAX);
    if (*nmissing < FEED_MAX) (*missing)[(*nmissing)++] = db_field(r, row, "id");
  }
  if (shape_job_open(w, b, r, row)) return ERR_OK;
  db_res *full;
  err_t e = jobs_get(&req->arena, db_field(r, row, "id"), &full);
  if (e != ERR_OK) return e == ERR_NOT_FOUND ? ERR_INTERNAL : e;
  shape_job_open(w, shape_jobs_bind(&req->arena, full), full, 0);
  return ERR_OK;
}

/* Writes every row of r as a Job JSON object in an array (the caller's extra members: none). */
static err_t write_jobs(hs_req *req, jw *w, const db_res *r) {
  shape_jobs *b = shape_jobs_bind(&req->arena, r);
  const char **missing = NULL;
  int nmissing = 0;
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) {
    err_t e = open_job(req, w, b, r, i, &missing, &nmissing);
    if (e != ERR_OK) return e;
    jw_obj_end(w);
  }
  jw_arr_end(w);
  request_repair(missing, nmissing);
  return ERR_OK;
}

err_t jobs_reply_list(hs_req *req, const db_res *r) {
  jw *w = hs_jw(req, 1024 * (size_t)(r->rows + 1));
  err_t e = write_jobs(req, w, r);
  return e == ERR_OK ? hs_ok_jw(req, w) : e;
}

err_t jobs_write_one(hs_req *req, const char *id) {
  db_res *r;
  err_t e = jobs_get(&req->arena, id, &r);
  return e == ERR_OK ? jobs_write_row(req, r) : e;
}

err_t jobs_write_row(hs_req *req, const db_res *r) {
  jw *w = hs_jw(req, 1024);
  shape_job_open(w, shape_jobs_bind(&req->arena, r), r, 0);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* ---- the feed ---- */

typedef struct feed_cursor {
  const db_res *r;
  shape_jobs *b;
  int row;
  int64_t feed_at, seq;
  const char *id;
} feed_cursor;

/* Moves c to its part's next job whose status is one of open (the cache's parts hold both). */
static void cursor_load(feed_cursor *c, const char *const open[2]) {
  for (; c->row < c->r->rows; c->row++) {
    const char *status = db_text(c->r, c->row, 8);
    if (!strcmp(status, open[0]) || !strcmp(status, open[1])) break;
  }
  if (c->row < c->r->rows)
    c->feed_at = db_int(c->r, c->row, 0), c->seq = db_int(c->r, c->row, 1), c->id = db_text(c->r, c->row, 2);
}

/* Whether a's job comes before b's in the feed: (feed_at, seq, id). */
static bool feed_before(const feed_cursor *a, const feed_cursor *b) {
  if (a->feed_at != b->feed_at) return a->feed_at < b->feed_at;
  if (a->seq != b->seq) return a->seq < b->seq;
  return strcmp(a->id, b->id) < 0;
}

static int cmp_id(const void *key, const void *elem) { return strcmp(key, *(const char *const *)elem); }

/* The provider's feed: the parts merged in feed order, up to the page's end (FEED_MAX unpaged),
 * keeping only the statuses asked for (open: PENDING and/or QUOTED, twice the same when one). */
static err_t reply_feed(hs_req *req, const char *const open[2]) {
  db_page pg;
  job_feed f = {0};
  err_t e = hs_page_begin(req, &FEED_KEYSET, NULL, FEED_MAX, &pg);
  if (!e && open[0]) e = jobs_store_feed(&req->arena, req->auth.id, &pg, open, &f);
  if (e != ERR_OK) return e;
  feed_cursor *cur = arena_alloc(&req->arena, sizeof *cur * (size_t)(f.nparts ? f.nparts : 1));
  size_t bytes = 64;
  for (int p = 0; p < f.nparts; p++) {
    cur[p] = (feed_cursor){f.parts[p], shape_jobs_bind(&req->arena, f.parts[p]), 0, 0, 0, NULL};
    cursor_load(&cur[p], open);
    for (int i = 0; i < f.parts[p]->rows; i++)
      for (int col = 3; col < 5; col++) bytes += strlen(db_text(f.parts[p], i, col) ? db_text(f.parts[p], i, col) : "");
    bytes += 256 * (size_t)f.parts[p]->rows;
  }
  /* the provider's pending quotes: their job ids, sorted, searched per job */
  const char **quoted = NULL;
  int nquoted = f.quoted ? f.quoted->rows : 0;
  if (nquoted) quoted = (const char **)f.quoted->cells;
  jw *w = hs_jw(req, bytes);
  jw_obj(w);
  jw_key(w, "jobs");
  jw_arr(w);
  const char **missing = NULL;
  int nmissing = 0;
  const db_res *last = NULL;
  int last_row = 0;
  for (int written = 0;; written++) {
    feed_cursor *next = NULL;
    for (int p = 0; p < f.nparts; p++) {
      feed_cursor *c = &cur[p];
      if (c->row < c->r->rows && (!next || feed_before(c, next))) next = c;
    }
    if (!next || (!pg.limit && written == FEED_MAX)) break;
    if (pg.limit && written == pg.limit) { /* a job past the page: the next page starts after the last */
      if ((e = hs_page_next_after(req, &pg, last, last_row)) != ERR_OK) return e;
      break;
    }
    const char *id = next->id;
    if ((e = open_job(req, w, next->b, next->r, next->row, &missing, &nmissing)) != ERR_OK) return e;
    jw_key(w, "quoted");
    jw_bool(w, nquoted && bsearch(id, quoted, (size_t)nquoted, sizeof *quoted, cmp_id));
    jw_obj_end(w);
    last = next->r, last_row = next->row;
    next->row++;
    cursor_load(next, open);
  }
  jw_arr_end(w);
  hs_page_jw_next(w, &pg);
  jw_obj_end(w);
  request_repair(missing, nmissing);
  return hs_ok_jw(req, w);
}

/* ?status=A,B as JOB_STATUS_COUNT slots (the unused ones NULL), or NULL without the filter. */
static const char **statuses_asked(hs_req *req) {
  json_t *list = json_object_get(req->query, "status");
  if (!list) return NULL;
  const char **out = arena_alloc(&req->arena, sizeof *out * JOB_STATUS_COUNT);
  for (size_t i = 0; i < JOB_STATUS_COUNT; i++) out[i] = json_string_value(json_array_get(list, i));
  return out;
}

err_t api_jobs_list(hs_req *req) {
  const char **statuses = statuses_asked(req);
  if (req->auth.role_bit == ROLE_PROVIDER) { /* the feed holds PENDING and QUOTED jobs */
    const char *pending = JOB_STATUS_NAMES[0], *quoted = JOB_STATUS_NAMES[1];
    bool want_pending = !statuses, want_quoted = !statuses;
    for (int s = 0; statuses && s < JOB_STATUS_COUNT && statuses[s]; s++)
      want_pending |= !strcmp(statuses[s], pending), want_quoted |= !strcmp(statuses[s], quoted);
    const char *open[2] = {want_pending ? pending : want_quoted ? quoted : NULL, want_quoted ? quoted : NULL};
    if (!open[1]) open[1] = open[0];
    return reply_feed(req, open);
  }
  db_page pg;
  db_res *r;
  err_t e = hs_page_begin(req, &CUSTOMER_JOBS_KEYSET, NULL, 0, &pg);
  if (!e) e = jobs_store_customer_jobs(&req->arena, req->auth.id, statuses, &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 1024 * (size_t)(r->rows + 1));
  jw_obj(w);
  jw_key(w, "jobs");
  if ((e = write_jobs(req, w, r)) != ERR_OK) return e;
  hs_page_jw_next(w, &pg);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* ---- one job ---- */

/* Member key: the object of fields from row 0's columns prefix..., or null without an id. */
static void write_card(hs_req *req, jw *w, const char *key, const hs_rj_field *fields, const db_res *r,
                       const char *prefix) {
  hs_rj *b = hs_rj_bind_as(&req->arena, fields, r, prefix);
  jw_key(w, key);
  if (db_text(r, 0, b->col[0]))
    hs_rj_object(w, b, r, 0);
  else
    jw_null(w);
}

err_t api_jobs_get(hs_req *req) {
  bool provider = req->auth.role_bit == ROLE_PROVIDER;
  db_res *r;
  err_t e = jobs_store_detail(&req->arena, hs_param(req, "id"), provider ? req->auth.id : NULL,
                              provider ? NULL : req->auth.id, &r);
  if (e) return hs_found_or_fail(req, e, "Job");
  const char *status = db_field(r, 0, "status"), *assigned = db_field(r, 0, "provider_id");
  bool owner = !provider && !strcmp(db_field(r, 0, "customer_id"), req->auth.id);
  bool is_assigned = provider && assigned && !strcmp(assigned, req->auth.id);
  bool open = !strcmp(status, "PENDING") || !strcmp(status, "QUOTED");
  bool matching = provider && open && db_int(r, 0, db_col(r, "viewer_matches")) == 1;
  if (!owner && !is_assigned && !matching) return hs_not_found(req, "Job");
  jw *w = hs_jw(req, 2048 + 512 * (size_t)r->rows);
  const char **missing = NULL;
  int nmissing = 0;
  if ((e = open_job(req, w, shape_jobs_bind(&req->arena, r), r, 0, &missing, &nmissing)) != ERR_OK) return e;
  static const hs_rj_field CUSTOMER_CARD[] = {{"id", "id", RJ_STR}, {"name", "name", RJ_STR}, {0}};
  static const hs_rj_field PROVIDER_CARD[] = {{"id", "id", RJ_STR},
                                              {"name", "name", RJ_STR},
                                              {"companyName", "company_name", RJ_STR},
                                              {"phone", "phone", RJ_STR},
                                              {0}};
  write_card(req, w, "customer", CUSTOMER_CARD, r, "customer_card_");
  write_card(req, w, "provider", PROVIDER_CARD, r, "provider_card_");
  jw_key(w, "quotes");
  jw_arr(w);
  hs_rj *quote = hs_rj_bind_as(&req->arena, SHAPE_QUOTE, r, "quote_");
  for (int i = 0; i < r->rows; i++)
    if (db_field(r, i, "quote_id")) hs_rj_object(w, quote, r, i);
  jw_arr_end(w);
  if (owner || is_assigned) { /* the payment is for the two parties only */
    jw_key(w, "payment");
    if (db_field(r, 0, "payment_id"))
      hs_rj_object(w, hs_rj_bind_as(&req->arena, PAYMENTS_JSON, r, "payment_"), r, 0);
    else
      jw_null(w);
  }
  jw_obj_end(w);
  request_repair(missing, nmissing);
  return hs_ok_jw(req, w);
}

/* ---- after completion ---- */

err_t api_jobs_reportable(hs_req *req) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_begin(req, &REPORTABLE_KEYSET, NULL, 0, &pg);
  if (!e) e = jobs_store_reportable(&req->arena, req->auth.id, clock_now_ms() - JOBS_REPORT_WINDOW_MS, &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 1024 * (size_t)(r->rows + 1));
  shape_jobs *b = shape_jobs_bind(&req->arena, r);
  const char **missing = NULL;
  int nmissing = 0;
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) {
    if ((e = open_job(req, w, b, r, i, &missing, &nmissing)) != ERR_OK) return e;
    jw_key(w, "provider");
    if (db_field(r, i, "provider_name")) {
      jw_obj(w);
      jw_key_str(w, "name", db_field(r, i, "provider_name"));
      jw_key_str(w, "companyName", db_field(r, i, "provider_company"));
      jw_obj_end(w);
    } else {
      jw_null(w);
    }
    jw_obj_end(w);
  }
  jw_arr_end(w);
  request_repair(missing, nmissing);
  return hs_ok_jw(req, w);
}

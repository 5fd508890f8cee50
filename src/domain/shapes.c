/* The Job and Quote JSON (shapes.h). Both are field tables over rowjson; the Job JSON is
 * split where the signed photo URLs go, which are the only members that depend on the moment
 * of reading (their expiry). */
#include "domain/shapes.h"
#include "ext/storage.h"
#include <string.h>

const hs_rj_field SHAPE_QUOTE[] = {
    {"id", "id", RJ_STR},
    {"jobId", "job_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"amount", "amount_cents", RJ_MONEY},
    {"platformFee", "platform_fee_cents", RJ_MONEY},
    {"totalAmount", "total_cents", RJ_MONEY},
    {"note", "note", RJ_STR},
    {"scheduledAt", "scheduled_at", RJ_ISO},
    {"status", "status", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

const hs_rj_field SHAPE_CUSTOMER[] = {
    {"id", "id", RJ_STR},
    {"email", "email", RJ_STR},
    {"name", "name", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"lat", "lat", RJ_REAL},
    {"lng", "lng", RJ_REAL},
    {"isPremium", "is_premium", RJ_BOOL},
    {"premiumSince", "premium_since", RJ_ISO},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

const hs_rj_field SHAPE_PROVIDER_CONTACT[] = {
    {"name", "name", RJ_STR},
    {"phone", "phone", RJ_STR},
    {"companyName", "company_name", RJ_STR},
    {"companyUrl", "company_url", RJ_STR},
    {"insuranceInfo", "insurance_info", RJ_STR},
    {"logoUrl", "logo_url", RJ_URL},
    {0},
};

const hs_rj_field SHAPE_PROVIDER_ROW[] = {
    {"id", "id", RJ_STR},
    {"name", "name", RJ_STR},
    {"email", "email", RJ_STR},
    {"companyName", "company_name", RJ_STR},
    {"services", "services", RJ_LIST},
    {"serviceZips", "service_zips", RJ_LIST},
    {"isPremium", "is_premium", RJ_BOOL},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

/* The Job JSON before the photos (json_head) and after them (json_tail). */
static const hs_rj_field JOB_HEAD[] = {
    {"id", "id", RJ_STR},
    {"customerId", "customer_id", RJ_STR},
    {"providerId", "provider_id", RJ_STR},
    {"service", "service", RJ_STR},
    {"description", "description", RJ_STR},
    {"preferredAt", "preferred_at", RJ_ISO},
    {"isAsap", "is_asap", RJ_BOOL},
    {"details", "details", RJ_JSON_CLEAN},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"lat", "lat", RJ_REAL},
    {"lng", "lng", RJ_REAL},
    {"status", "status", RJ_STR},
    {0},
};
static const hs_rj_field JOB_PHOTOS[] = {
    {"images", "images", RJ_URLS},
    {"beforeImages", "before_images", RJ_URLS},
    {"afterImages", "after_images", RJ_URLS},
    {0},
};
static const hs_rj_field JOB_TAIL[] = {
    {"tipAmount", "tip_cents", RJ_MONEY},
    {"etaMinutes", "eta_minutes", RJ_INT},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

struct shape_jobs {
  arena *a;
  const db_res *r;
  hs_rj *head, *photos, *tail; /* head and tail bound when a row without stored parts needs them */
  int stored_head, stored_tail;
};

/* The photo members of a job without photos, the common case: nothing to sign. */
static const char NO_PHOTOS[] = ",\"images\":[],\"beforeImages\":[],\"afterImages\":[]";

static bool no_photos(const shape_jobs *b, const db_res *r, int row) {
  for (int i = 0; i < b->photos->n; i++) {
    const char *keys = db_text(r, row, b->photos->col[i]);
    if (keys && strcmp(keys, "[]")) return false;
  }
  return true;
}

static bool all_bound(const hs_rj *b) {
  for (int i = 0; i < b->n; i++)
    if (b->col[i] < 0) return false;
  return true;
}

shape_jobs *shape_jobs_bind(arena *a, const db_res *r) {
  shape_jobs *b = arena_alloc(a, sizeof *b);
  b->a = a, b->r = r;
  b->photos = hs_rj_bind(a, JOB_PHOTOS, r);
  b->stored_head = db_col(r, "json_head");
  b->stored_tail = db_col(r, "json_tail");
  return b;
}

/* Binds the columns to render a row from; false when the result lacks some. */
static bool can_render(shape_jobs *b) {
  if (!b->head) b->head = hs_rj_bind(b->a, JOB_HEAD, b->r), b->tail = hs_rj_bind(b->a, JOB_TAIL, b->r);
  return all_bound(b->head) && all_bound(b->tail);
}

bool shape_job_missing(const shape_jobs *b, const db_res *r, int row) {
  return !db_text(r, row, b->stored_head) || !db_text(r, row, b->stored_tail);
}

bool shape_job_open(jw *w, shape_jobs *b, const db_res *r, int row) {
  const char *head = db_text(r, row, b->stored_head), *tail = db_text(r, row, b->stored_tail);
  bool stored = head && tail;
  if (!stored && !can_render(b)) return false;
  if (stored) {
    jw_raw_value(w, head, db_len(r, row, b->stored_head));
  } else {
    jw_obj(w);
    hs_rj_members(w, b->head, r, row);
  }
  if (no_photos(b, r, row))
    jw_lit(w, NO_PHOTOS);
  else
    hs_rj_members(w, b->photos, r, row);
  if (stored)
    jw_raw(w, tail, db_len(r, row, b->stored_tail));
  else
    hs_rj_members(w, b->tail, r, row);
  return true;
}

void shape_job_render(arena *a, const db_res *r, int row, const char **head, const char **tail) {
  jw h, t;
  jw_init(&h, a, 768);
  jw_obj(&h);
  hs_rj_members(&h, hs_rj_bind(a, JOB_HEAD, r), r, row);
  jw_init(&t, a, 160);
  jw_obj(&t);
  hs_rj_members(&t, hs_rj_bind(a, JOB_TAIL, r), r, row);
  t.buf[0] = ','; /* the tail continues the object after the photos: "{..." becomes ",..." */
  *head = jw_text(&h), *tail = jw_text(&t);
}

void shape_job_render_with(arena *a, const db_res *r, int row, const char *const *columns, const char *const *values,
                           int n, const char **head, const char **tail) {
  /* a one-row copy of the row's cells (sharing their text), with the listed cells replaced */
  db_res *one = arena_alloc(a, sizeof *one);
  db_col(r, "id"); /* builds r's column index, which the copy shares (the copy is never freed) */
  *one = (db_res){
      .rows = 1, .cols = r->cols, .colnames = r->colnames, .col_index = r->col_index, .col_slots = r->col_slots};
  one->cells = arena_alloc(a, sizeof *one->cells * (size_t)r->cols);
  one->lens = arena_alloc(a, sizeof *one->lens * (size_t)r->cols);
  memcpy(one->cells, r->cells + (size_t)row * (size_t)r->cols, sizeof *one->cells * (size_t)r->cols);
  memcpy(one->lens, r->lens + (size_t)row * (size_t)r->cols, sizeof *one->lens * (size_t)r->cols);
  for (int i = 0; i < n; i++) {
    int col = db_col(r, columns[i]);
    if (col < 0) continue;
    one->cells[col] = (char *)values[i];
    one->lens[col] = values[i] ? (uint32_t)strlen(values[i]) : 0;
  }
  shape_job_render(a, one, 0, head, tail);
}

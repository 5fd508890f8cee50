/* Smart bundles: the open jobs of the next 7 days that a provider matches, has not quoted, can
 * fit into its availability and does not clash with its scheduled work, grouped by day and
 * ordered as a route (nearest first from the provider's base, then nearest next; jobs without
 * coordinates last). Prices are the market rate clamped to the bundle range, so the answer is
 * deterministic for the same data. Accepting quotes each job through the quotes domain
 * (quotes_submit), one transaction per job. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/providers/availability.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include "domain/quotes/quotes.h"
#include "ext/digest.h"
#include "ext/geo.h"
#include "http/rowjson.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HORIZON_MS (7 * DAY_MS)
#define CLASH_MS (2LL * 3600 * 1000) /* a job is taken to need two hours */
#define MAX_BUNDLES 3
#define MAX_ITEMS 8
#define HISTORY_MS (30 * DAY_MS)
#define BUNDLE_MIN_CENTS 2500
#define BUNDLE_MAX_CENTS 50000

static int64_t clamp_cents(int64_t c) {
  return c < BUNDLE_MIN_CENTS ? BUNDLE_MIN_CENTS : c > BUNDLE_MAX_CENTS ? BUNDLE_MAX_CENTS : c;
}

typedef struct stop {
  int row; /* in the candidates result */
  bool has_point;
  double lat, lng;
  char date[11];
} stop;

typedef struct bundle {
  char date[11];
  int first, count; /* stops[first .. first+count) of one day, in route order after routing */
  int64_t earnings; /* cents */
  const char *json; /* the Bundle JSON, in the request's arena */
  size_t len;
} bundle;

/* The provider's base: the centroid of its first service ZIP found in the table. */
static bool base_point(const db_res *pro, double *lat, double *lng) {
  json_t *zips = jx_parse_or(db_field(pro, 0, "service_zips"), json_array());
  bool found = false;
  size_t i;
  json_t *z;
  json_array_foreach(zips, i, z) if (!found) found = geo_zip_centroid(json_string_value(z), lat, lng);
  json_decref(zips);
  return found;
}

static bool clashes(int64_t at, const db_res *schedule) {
  for (int i = 0; i < schedule->rows; i++) {
    const char *t = db_field(schedule, i, "scheduled_at");
    if (t && llabs(strtoll(t, NULL, 10) - at) < CLASH_MS) return true;
  }
  return false;
}

/* Orders stops in place: from (lat, lng) the nearest next each time (ties: the earlier in the
 * candidates' order, which is by preferredAt); stops without a point keep their order at the
 * end. */
static void route(stop *s, int n, bool has_base, double lat, double lng) {
  for (int k = 0; k < n; k++) {
    int best = -1;
    double best_d = 0;
    for (int i = k; i < n; i++) {
      if (!s[i].has_point) continue;
      double d = has_base ? geo_distance_miles(lat, lng, s[i].lat, s[i].lng) : 0;
      if (best < 0 || d < best_d || (d == best_d && s[i].row < s[best].row)) best = i, best_d = d;
    }
    if (best < 0) return; /* only stops without a point remain, already in order */
    stop picked = s[best];
    memmove(s + k + 1, s + k, (size_t)(best - k) * sizeof *s);
    s[k] = picked;
    has_base = true, lat = picked.lat, lng = picked.lng;
  }
}

/* The provider's earnings after the platform fee per day worked over the last 30 days. */
static int64_t avg_daily_earnings(const db_res *won, int64_t now) {
  int64_t total = 0, days = 0;
  int64_t *seen = xcalloc((size_t)won->rows + 1, sizeof *seen);
  for (int i = 0; i < won->rows; i++) {
    if (strcmp(db_field(won, i, "status"), "COMPLETED")) continue;
    int64_t at = strtoll(db_field(won, i, "completed_at"), NULL, 10);
    if (at < now - HISTORY_MS || at > now) continue;
    int64_t amount = strtoll(db_field(won, i, "amount_cents"), NULL, 10);
    total += amount - quotes_platform_fee(amount);
    int64_t day = at / DAY_MS;
    bool known = false;
    for (int64_t k = 0; k < days && !known; k++) known = seen[k] == day;
    if (!known) seen[days++] = day;
  }
  free(seen);
  return days ? llround((double)total / (double)days) : 0;
}

/* A candidate job as a bundle item shows it. */
static const hs_rj_field JOB[] = {
    {"id", "id", RJ_STR},
    {"service", "service", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"preferredAt", "preferred_at", RJ_ISO},
    {"lat", "lat", RJ_REAL},
    {"lng", "lng", RJ_REAL},
    {"customer", "customer_", RJ_OBJECT, (const hs_rj_field[]){{"id", "id", RJ_STR}, {"name", "name", RJ_STR}, {0}}},
    {0},
};

/* Writes one routed stop as a bundle item (job: JOB bound to c); *prev is the previous point
 * (updated). */
static void item_jw(jw *w, const hs_rj *job, const db_res *c, const stop *s, int order, int64_t price, bool *has_prev,
                    double *plat, double *plng, double *miles_total, int64_t *minutes_total) {
  jw_obj(w);
  jw_key(w, "routeOrder");
  jw_int(w, order);
  jw_key(w, "estimatedEarnings");
  jw_money(w, price - quotes_platform_fee(price));
  jw_key(w, "estimatedPrice");
  jw_money(w, price);
  jw_key(w, "distanceMi");
  if (s->has_point && *has_prev) {
    double miles = geo_road_miles(*plat, *plng, s->lat, s->lng);
    int m = geo_drive_minutes(*plat, *plng, s->lat, s->lng);
    jw_real(w, round(miles * 10) / 10);
    jw_key(w, "driveMinutes");
    jw_int(w, m);
    *miles_total += miles, *minutes_total += m;
  } else {
    jw_null(w);
    jw_key(w, "driveMinutes");
    jw_null(w);
  }
  if (s->has_point) *has_prev = true, *plat = s->lat, *plng = s->lng;
  jw_key(w, "job");
  hs_rj_object(w, job, c, s->row);
  jw_obj_end(w);
}

/* Builds the bundle of stops[first .. first+count), already routed: its JSON in a. */
static void build_bundle(arena *a, bundle *b, const db_res *c, const stop *stops, const char *provider,
                         const int64_t *rates, bool has_base, double blat, double blng, int64_t avg_daily) {
  jw w;
  jw_init(&w, a, 1024 * (size_t)(b->count + 1));
  hs_rj *job = hs_rj_bind(a, JOB, c);
  bool has_prev = has_base;
  double plat = blat, plng = blng, miles = 0;
  int64_t minutes = 0;
  char key[64 + MAX_ITEMS * 32] = "";
  size_t at = (size_t)snprintf(key, sizeof key, "%s|%s", provider, b->date);
  b->earnings = 0;
  jw_obj(&w);
  jw_key_str(&w, "date", b->date);
  jw_key(&w, "jobCount");
  jw_int(&w, b->count);
  jw_key(&w, "items");
  jw_arr(&w);
  for (int k = 0; k < b->count; k++) {
    const stop *s = &stops[b->first + k];
    int64_t price = rates[s->row];
    b->earnings += price - quotes_platform_fee(price);
    item_jw(&w, job, c, s, k + 1, price, &has_prev, &plat, &plng, &miles, &minutes);
    at += (size_t)snprintf(key + at, sizeof key - at, "|%s", db_field(c, s->row, "id"));
  }
  jw_arr_end(&w);
  char digest[65];
  sha256_hex(key, strlen(key), digest);
  digest[24] = 0;
  int64_t boost = b->earnings - avg_daily;
  jw_key_str(&w, "id", arena_printf(a, "b%s", digest)); /* a digest of the provider, day and jobs */
  jw_key(&w, "projectedEarnings");
  jw_money(&w, b->earnings);
  jw_key(&w, "avgDailyEarnings");
  jw_money(&w, avg_daily);
  jw_key(&w, "boostDollars");
  jw_money(&w, boost);
  jw_key(&w, "boostPct");
  jw_int(&w, avg_daily > 0 ? llround(100.0 * (double)boost / (double)avg_daily) : 0);
  jw_key(&w, "totalDistanceMi");
  jw_real(&w, round(miles * 10) / 10);
  jw_key(&w, "totalDriveMinutes");
  jw_int(&w, minutes);
  jw_obj_end(&w);
  b->json = jw_text(&w), b->len = jw_len(&w);
}

static int by_earnings(const void *x, const void *y) {
  const bundle *a = x, *b = y;
  if (a->earnings != b->earnings) return a->earnings > b->earnings ? -1 : 1;
  return strcmp(a->date, b->date);
}

err_t api_providers_bundles(hs_req *req) {
  arena *a = &req->arena;
  const char *id = req->auth.id;
  int64_t now = clock_now_ms();
  db_res *pro, *c, *schedule, *won;
  err_t e = prov_store_get(a, id, &pro);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Provider");
  if (e != ERR_OK || (e = prov_store_bundle_candidates(a, id, now, now + HORIZON_MS, &c)) != ERR_OK ||
      (e = prov_store_schedule(a, id, DB_PAGE_ALL(&SCHEDULE_KEYSET), &schedule)) != ERR_OK ||
      (e = prov_store_won_jobs(a, id, &won)) != ERR_OK)
    return e;
  avail_week week;
  availability_read(arena_json(a, availability_json(db_field(pro, 0, "availability"))), &week);
  double blat = 0, blng = 0;
  bool has_base = base_point(pro, &blat, &blng);
  /* the jobs that fit, in the candidates' order (preferredAt, then posting order) */
  stop *stops = arena_alloc(a, sizeof *stops * (size_t)(c->rows + 1));
  int64_t *rates = arena_alloc(a, sizeof *rates * (size_t)(c->rows + 1));
  int n = 0;
  quote_market markets[4];
  const char *market_of[4] = {0};
  for (int i = 0; i < c->rows; i++) {
    int64_t at = strtoll(db_field(c, i, "preferred_at"), NULL, 10);
    if (!availability_fits(&week, at) || clashes(at, schedule)) continue;
    stop *s = &stops[n++];
    *s = (stop){.row = i};
    s->has_point = db_field(c, i, "lat") && db_field(c, i, "lng");
    if (s->has_point) s->lat = strtod(db_field(c, i, "lat"), NULL), s->lng = strtod(db_field(c, i, "lng"), NULL);
    char iso[25];
    clock_format_iso(at, iso);
    memcpy(s->date, iso, 10);
    /* the market rate of the job's service, looked up once per service */
    const char *service = db_field(c, i, "service");
    int m = 0;
    while (m < 4 && market_of[m] && strcmp(market_of[m], service)) m++;
    if (m < 4 && !market_of[m]) {
      market_of[m] = service;
      if ((e = quotes_market(a, service, &markets[m])) != ERR_OK) return e;
    }
    rates[i] = clamp_cents(m < 4 && markets[m].known ? markets[m].rate_cents : BUNDLE_MIN_CENTS);
  }
  /* one bundle per day: stops of a day are contiguous (candidates come by preferredAt) */
  bundle *days = arena_alloc(a, sizeof *days * (size_t)(n + 1));
  int ndays = 0;
  for (int i = 0; i < n; i++) {
    if (ndays && !strcmp(days[ndays - 1].date, stops[i].date)) {
      days[ndays - 1].count++;
      continue;
    }
    days[ndays] = (bundle){.first = i, .count = 1};
    memcpy(days[ndays].date, stops[i].date, 11);
    ndays++;
  }
  int64_t avg_daily = avg_daily_earnings(won, now);
  for (int d = 0; d < ndays; d++) {
    route(stops + days[d].first, days[d].count, has_base, blat, blng);
    if (days[d].count > MAX_ITEMS) days[d].count = MAX_ITEMS;
    build_bundle(a, &days[d], c, stops, id, rates, has_base, blat, blng, avg_daily);
  }
  qsort(days, (size_t)ndays, sizeof *days, by_earnings);
  jw *w = hs_jw(req, 64);
  jw_arr(w);
  for (int d = 0; d < ndays && d < MAX_BUNDLES; d++) jw_raw_value(w, days[d].json, days[d].len);
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

err_t api_providers_accept_bundle(hs_req *req) {
  json_t *jobs = json_object_get(req->body, "jobs");
  int accepted = 0, skipped = 0;
  size_t i;
  json_t *item;
  json_array_foreach(jobs, i, item) {
    quote_request q = {
        .provider_id = req->auth.id,
        .job_id = json_string_value(json_object_get(item, "jobId")),
        /* clamped in dollars first, so no amount is too large for cents */
        .amount_cents = clamp_cents(jx_cents(fmin(fmax(json_number_value(json_object_get(item, "amount")), 0), 1e6))),
    };
    char quote_id[ID_LEN + 1];
    switch (quotes_submit(&req->arena, &q, quote_id)) {
    case QUOTE_CREATED: accepted++; break;
    case QUOTE_TOO_SMALL: /* not with the bundle range's prices */
    case QUOTE_NO_JOB:
    case QUOTE_NOT_OPEN:
    case QUOTE_DUPLICATE: skipped++; break;
    case QUOTE_UNVERIFIED: return quotes_fail_unverified(req);
    case QUOTE_FAILED: return ERR_INTERNAL;
    }
  }
  return hs_ok_pack(req, "{s:i,s:i}", "accepted", accepted, "skipped", skipped);
}

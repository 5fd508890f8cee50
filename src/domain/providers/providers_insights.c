/* Provider insights (GET /providers/me/insights) and Preferred Pro insights
 * (GET /providers/me/premium-insights). Every figure is computed here from rows of jobs,
 * quotes, payments, transfers to the provider and reviews; docs/decisions.md ("Provider
 * tools") states each formula.
 * Sums are kept in integer cents in jansson objects, maps edited as the rows are tallied (by
 * service, ZIP, year), and written in dollars with the answer's writer at the end. */
#include "core/clock.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/payouts/payouts.h"
#include "domain/providers/providers_api.h"
#include "domain/providers/providers_store.h"
#include "domain/quotes/quotes.h"
#include "ext/geo.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RECENT_REVIEWS 5
#define LOST_BIDS 10
#define TREND_MONTHS 6
#define NEAR_MILES 25.0
#define ZIP_EXPANSION 5
#define NSERVICES 4

/* ---- small accumulators: objects of integer cents (or counts) by key ---- */

static void add_to(json_t *obj, const char *key, int64_t n) {
  json_t *v = json_object_get(obj, key);
  json_object_set_new(obj, key, json_integer(json_integer_value(v) + n));
}

/* Member name: { key: cents } as { key: dollars } (keys: services, ZIPs, years: nothing to
 * escape). */
static void in_dollars(jw *w, const char *name, json_t *cents) {
  const char *k;
  json_t *v;
  jw_key(w, name);
  jw_obj(w);
  json_object_foreach(cents, k, v) {
    jw_key(w, k);
    jw_money(w, json_integer_value(v));
  }
  jw_obj_end(w);
}

static int64_t cell_int(const db_res *r, int i, const char *col) {
  const char *s = db_field(r, i, col);
  return s ? strtoll(s, NULL, 10) : 0;
}

/* "YYYY" (len 4) or "YYYY-MM" (len 7) of an instant, UTC. */
static void period_of(int64_t ms, char *out, size_t len) {
  char iso[25];
  clock_format_iso(ms, iso);
  memcpy(out, iso, len);
  out[len] = 0;
}

/* A boolean cell (INTEGER 0/1). */
static bool is_set(const char *cell) { return cell && cell[0] == '1'; }

static bool is_scheduled(const char *status) {
  return !strcmp(status, "ACCEPTED") || !strcmp(status, "ON_THE_WAY") || !strcmp(status, "IN_PROGRESS");
}

/* ---- GET /providers/me/insights ---- */

typedef struct earnings {
  json_t *by_service, *by_zip, *by_year; /* income, cents */
  json_t *scheduled, *awaiting;          /* pending income by service, cents */
  int64_t scheduled_total, awaiting_total, turnaround_sum, turnaround_n;
} earnings;

/* Sorts each won job into income (captured) or scheduled (not yet completed). */
static void tally(const db_res *r, earnings *t) {
  for (int i = 0; i < r->rows; i++) {
    const char *service = db_field(r, i, "service"), *status = db_field(r, i, "status");
    const char *pay = db_field(r, i, "pay_status");
    int64_t amount = cell_int(r, i, "amount_cents"), tips = cell_int(r, i, "tip_cents");
    if (is_scheduled(status)) {
      add_to(t->scheduled, service, amount);
      t->scheduled_total += amount;
      continue;
    }
    if (strcmp(status, "COMPLETED")) continue;
    int64_t done = cell_int(r, i, "completed_at");
    if (db_field(r, i, "accepted_at")) t->turnaround_sum += done - cell_int(r, i, "accepted_at"), t->turnaround_n++;
    int64_t income = tips;
    if (pay && (!strcmp(pay, "PAID") || !strcmp(pay, "REFUNDED"))) /* less what was refunded of it */
      income += payouts_earned_after_refunds(amount, cell_int(r, i, "pay_cents"), cell_int(r, i, "pay_refunded_cents"));
    if (income == 0) continue;
    char year[5];
    period_of(done, year, 4);
    add_to(t->by_service, service, income);
    add_to(t->by_zip, db_field(r, i, "zip"), income);
    json_t *y = json_object_get(t->by_year, year);
    if (!y) json_object_set_new(t->by_year, year, y = json_object());
    add_to(y, service, income);
  }
}

/* Awaiting transfer: the provider's job and tip transfers not paid yet (scheduled, waiting for
 * its payout account, held by a report, or failed), by their job's service. */
static void awaiting(const db_res *moves, earnings *t) {
  for (int i = 0; i < moves->rows; i++) {
    if (!payouts_unpaid(db_field(moves, i, "status"))) continue;
    const char *service = db_field(moves, i, "service");
    int64_t amount = cell_int(moves, i, "amount_cents");
    if (service) add_to(t->awaiting, service, amount);
    t->awaiting_total += amount;
  }
}

/* Member topZip: the ZIP with the most income (the smallest ZIP among equals), or null. */
static void top_zip(jw *w, json_t *by_zip) {
  const char *best = NULL, *k;
  json_int_t most = 0;
  json_t *v;
  json_object_foreach(by_zip, k, v) {
    json_int_t n = json_integer_value(v);
    if (!best || n > most || (n == most && strcmp(k, best) < 0)) best = k, most = n;
  }
  jw_key(w, "topZip");
  best ? jw_pack(w, "{s:s,s:M}", "zip", best, "total", (int64_t)most) : jw_null(w);
}

/* The Preferred Pro fee as the member sees it: owed while a fee is unpaid (billed and not yet
 * taken from a transfer, or this month's not billed yet), for how much; the balance owed
 * besides (owed_row: payouts_read_owed). */
static void membership_fee(jw *w, const db_res *pro, const db_res *owed_row) {
  int64_t owed_all = owed_row->rows ? cell_int(owed_row, 0, "owed_cents") : 0;
  int64_t fees_owed = owed_row->rows ? cell_int(owed_row, 0, "fees_owed_cents") : 0;
  int64_t balance = owed_all > 0 ? -owed_all : 0;
  const char *ends = db_field(pro, 0, "premium_ends_at");
  int64_t now = clock_now_ms();
  bool member = is_set(db_field(pro, 0, "is_premium")) && (!ends || strtoll(ends, NULL, 10) > now);
  jw_key(w, "membershipFee");
  if (!member && fees_owed <= 0)
    return jw_pack(w, "{s:b,s:i,s:s,s:M}", "owed", 0, "amount", 0, "reason", "Not a Preferred Pro member", "balance",
                   balance);
  char month[8];
  period_of(now, month, 7);
  const char *billed = db_field(pro, 0, "premium_billed_month");
  bool this_month = member && (!billed || strcmp(billed, month));
  int64_t amount = (fees_owed > 0 ? fees_owed : 0) + (this_month ? PAYOUTS_PREMIUM_FEE_CENTS : 0);
  const char *reason = fees_owed > 0 && this_month ? "Preferred Pro fees unpaid, this month's included"
                       : fees_owed > 0             ? "A Preferred Pro fee billed is not paid yet: it is taken from "
                                                     "your next transfers"
                       : this_month                ? "Preferred Pro membership fee for this month"
                                                   : "This month's fee is paid";
  jw_pack(w, "{s:b,s:M,s:s,s:s,s:b,s:M}", "owed", amount > 0, "amount", amount, "month", month, "reason", reason,
          "cancelAtMonthEnd", member && ends != NULL, "balance", balance);
}

/* A row of prov_store_reviews as the provider sees it: the reviewer's job and name. */
static const hs_rj_field REVIEW[] = {{"", "", RJ_INCLUDE, PROV_REVIEW_JSON},
                                     {"jobId", "job_id", RJ_STR},
                                     {"customerName", "customer_name", RJ_STR},
                                     {0}};

err_t api_providers_insights(hs_req *req) {
  arena *a = &req->arena;
  const char *id = req->auth.id;
  db_read reads[] = {prov_read(a, id),
                     prov_read_won_jobs(a, id),
                     payouts_read_provider_records(a, id),
                     prov_read_review_stats(a, id),
                     prov_read_reviews(a, id, &(const db_page){.ks = &REVIEWS_KEYSET, .fetch = RECENT_REVIEWS}),
                     payouts_read_owed(a, id)};
  err_t e = db_to_err(db_query_all(a, reads, 6)); /* independent reads: one round trip */
  if (e != ERR_OK) return e;
  db_res *pro = reads[0].res, *won = reads[1].res, *moves = reads[2].res, *stats = reads[3].res,
         *reviews = reads[4].res;
  if (pro->rows == 0) return hs_not_found(req, "Provider");
  earnings t = {arena_json(a, json_object()),
                arena_json(a, json_object()),
                arena_json(a, json_object()),
                arena_json(a, json_object()),
                arena_json(a, json_object()),
                0,
                0,
                0,
                0};
  tally(won, &t);
  awaiting(moves, &t);
  const char *avg = db_field(stats, 0, "average");
  jw *w = hs_jw(req, 2048 + 384 * (size_t)reviews->rows);
  jw_obj(w);
  jw_key(w, "averageRating");
  avg ? jw_real(w, round(strtod(avg, NULL) * 100) / 100) : jw_null(w);
  jw_key(w, "totalReviews");
  jw_int(w, cell_int(stats, 0, "total"));
  jw_key(w, "avgTurnaroundMs");
  t.turnaround_n ? jw_int(w, llround((double)t.turnaround_sum / (double)t.turnaround_n)) : jw_null(w);
  in_dollars(w, "incomeByService", t.by_service);
  top_zip(w, t.by_zip);
  jw_key(w, "annualIncomeByService");
  jw_obj(w);
  const char *year;
  json_t *services;
  json_object_foreach(t.by_year, year, services) in_dollars(w, year, services);
  jw_obj_end(w);
  membership_fee(w, pro, reads[5].res);
  jw_key(w, "pendingIncome");
  jw_obj(w);
  jw_key(w, "scheduled");
  jw_money(w, t.scheduled_total);
  in_dollars(w, "scheduledByService", t.scheduled);
  jw_key(w, "awaitingTransfer");
  jw_money(w, t.awaiting_total);
  in_dollars(w, "awaitingByService", t.awaiting);
  jw_obj_end(w);
  jw_key(w, "recentReviews");
  hs_rj_array(w, a, REVIEW, reviews);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* ---- GET /providers/me/premium-insights ---- */

static int service_index(const char *s) {
  for (int i = 0; i < NSERVICES; i++)
    if (s && !strcmp(SERVICE_NAMES[i], s)) return i;
  return -1;
}

/* What one job of a service is taken to be worth: its market rate, 0 without one. */
static int64_t rate_of(const quote_market *m, const char *service) {
  int i = service_index(service);
  return i >= 0 && m[i].known ? m[i].rate_cents : 0;
}

static bool contains_str(json_t *arr, const char *s) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) if (!strcmp(json_string_value(v), s)) return true;
  return false;
}

typedef struct zip_demand {
  const char *zip;
  double miles;
  int64_t open_jobs, income;
  int counts[NSERVICES];
} zip_demand;

static int by_demand(const void *x, const void *y) {
  const zip_demand *a = x, *b = y;
  if (a->open_jobs != b->open_jobs) return a->open_jobs > b->open_jobs ? -1 : 1;
  if (a->income != b->income) return a->income > b->income ? -1 : 1;
  if (a->miles != b->miles) return a->miles < b->miles ? -1 : 1;
  return strcmp(a->zip, b->zip);
}

/* The ZIPs within NEAR_MILES of the provider's ZIPs that it does not serve, nearest first
 * (at most PROV_NEAR_ZIPS); *n receives the count. */
static geo_near *nearby_zips(arena *a, json_t *current, int *n) {
  geo_near *all = arena_alloc(a, sizeof *all * PROV_NEAR_ZIPS * 2),
           *found = arena_alloc(a, sizeof *found * PROV_NEAR_ZIPS);
  int count = 0;
  size_t i;
  json_t *z;
  json_array_foreach(current, i, z) {
    double lat, lng;
    if (!geo_zip_centroid(json_string_value(z), &lat, &lng)) continue;
    int got = geo_zips_near(lat, lng, NEAR_MILES, found, PROV_NEAR_ZIPS);
    for (int k = 0; k < got; k++) {
      if (contains_str(current, found[k].zip)) continue;
      int at = 0;
      while (at < count && strcmp(all[at].zip, found[k].zip)) at++;
      if (at < count) {
        if (found[k].miles < all[at].miles) all[at].miles = found[k].miles;
        continue;
      }
      if (count == PROV_NEAR_ZIPS * 2) { /* keep the nearest: replace the farthest when nearer */
        int far = 0;
        for (int m = 1; m < count; m++)
          if (all[m].miles > all[far].miles) far = m;
        if (found[k].miles < all[far].miles) all[far] = found[k];
        continue;
      }
      all[count++] = found[k];
    }
  }
  for (int x = 1; x < count; x++) /* nearest first */
    for (int y = x; y > 0 && all[y - 1].miles > all[y].miles; y--) {
      geo_near tmp = all[y];
      all[y] = all[y - 1], all[y - 1] = tmp;
    }
  *n = count < PROV_NEAR_ZIPS ? count : PROV_NEAR_ZIPS;
  return all;
}

/* The demand of the ZIPs near the provider's that it does not serve, most open jobs first (*d,
 * *n of them). */
static err_t zip_demands(arena *a, const char *provider, json_t *current, const quote_market *m, zip_demand **out,
                         int *nout) {
  int n;
  geo_near *near = nearby_zips(a, current, &n);
  const char **zips = arena_alloc(a, sizeof *zips * (size_t)(n + 1));
  zip_demand *d = arena_alloc(a, sizeof *d * (size_t)(n + 1));
  for (int i = 0; i < n; i++) zips[i] = near[i].zip, d[i] = (zip_demand){near[i].zip, near[i].miles, 0, 0, {0}};
  db_res *r;
  err_t e = prov_store_open_jobs_in(a, provider, zips, n, &r);
  if (e != ERR_OK) return e;
  for (int i = 0; i < r->rows; i++) {
    int at = 0, s = service_index(db_field(r, i, "service"));
    while (at < n && strcmp(d[at].zip, db_field(r, i, "zip"))) at++;
    if (at == n || s < 0) continue;
    int64_t count = cell_int(r, i, "open_jobs");
    d[at].counts[s] += (int)count;
    d[at].open_jobs += count;
    d[at].income += count * rate_of(m, SERVICE_NAMES[s]);
  }
  qsort(d, (size_t)n, sizeof *d, by_demand);
  *out = d, *nout = n;
  return ERR_OK;
}

/* Member zipExpansion: the first ZIP_EXPANSION of the n demands d that have open jobs. */
static void zip_expansion(jw *w, const zip_demand *d, int n) {
  jw_key(w, "zipExpansion");
  jw_arr(w);
  for (int i = 0; i < n && i < ZIP_EXPANSION && d[i].open_jobs > 0; i++) {
    int top = 0;
    for (int s = 0; s < NSERVICES; s++)
      if (d[i].counts[s] > d[i].counts[top]) top = s;
    jw_obj(w);
    jw_key_str(w, "zip", d[i].zip);
    jw_key(w, "openJobs");
    jw_int(w, d[i].open_jobs);
    jw_key(w, "projectedMonthlyIncome");
    jw_money(w, d[i].income);
    jw_key_str(w, "topService", SERVICE_NAMES[top]);
    jw_key(w, "serviceBreakdown");
    jw_obj(w);
    for (int s = 0; s < NSERVICES; s++)
      if (d[i].counts[s]) {
        jw_key(w, SERVICE_NAMES[s]);
        jw_int(w, d[i].counts[s]);
      }
    jw_obj_end(w);
    jw_obj_end(w);
  }
  jw_arr_end(w);
}

/* Per service the provider offers: its average quote against the market's, its win rate and
 * its monthly averages over the last TREND_MONTHS months. */
static void pricing_trends(jw *w, const db_res *q, json_t *services, const quote_market *m) {
  char months[TREND_MONTHS][8];
  int64_t now = clock_now_ms();
  char current[8];
  period_of(now, current, 7);
  int year = atoi(current), month = atoi(current + 5);
  for (int k = TREND_MONTHS - 1; k >= 0; k--) {
    snprintf(months[k], sizeof months[k], "%04d-%02d", year, month);
    if (--month == 0) month = 12, year--;
  }
  jw_key(w, "pricingTrends");
  jw_obj(w);
  size_t si;
  json_t *sv;
  json_array_foreach(services, si, sv) {
    const char *service = json_string_value(sv);
    int64_t bids = 0, won = 0, sum = 0, msum[TREND_MONTHS] = {0}, mbids[TREND_MONTHS] = {0};
    for (int i = 0; i < q->rows; i++) {
      if (strcmp(db_field(q, i, "service"), service)) continue;
      int64_t amount = cell_int(q, i, "amount_cents");
      bids++, sum += amount;
      if (!strcmp(db_field(q, i, "status"), "ACCEPTED")) won++;
      char ym[8];
      period_of(cell_int(q, i, "created_at"), ym, 7);
      for (int k = 0; k < TREND_MONTHS; k++)
        if (!strcmp(months[k], ym)) msum[k] += amount, mbids[k]++;
    }
    int s = service_index(service);
    jw_key(w, service); /* one of SERVICE_NAMES: nothing to escape */
    jw_obj(w);
    jw_key(w, "myAvg");
    bids ? jw_money(w, llround((double)sum / (double)bids)) : jw_null(w);
    jw_key(w, "marketAvg");
    s >= 0 && m[s].known ? jw_money(w, m[s].mean_cents) : jw_null(w);
    jw_key(w, "winRate");
    jw_real(w, bids ? round((double)won / (double)bids * 100) / 100 : 0.0);
    jw_key(w, "totalBids");
    jw_int(w, bids);
    jw_key(w, "wonBids");
    jw_int(w, won);
    jw_key(w, "trend");
    jw_arr(w);
    for (int k = 0; k < TREND_MONTHS; k++) {
      jw_obj(w);
      jw_key_str(w, "month", months[k]);
      jw_key(w, "myAvg");
      mbids[k] ? jw_money(w, llround((double)msum[k] / (double)mbids[k])) : jw_null(w);
      jw_key(w, "bids");
      jw_int(w, mbids[k]);
      jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_obj_end(w);
  }
  jw_obj_end(w);
}

/* Member lostBids: the rows of prov_store_lost_bids. */
static void lost_bids(jw *w, const db_res *r) {
  jw_key(w, "lostBids");
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) {
    int64_t mine = cell_int(r, i, "amount_cents"), winning = cell_int(r, i, "winning_cents");
    jw_obj(w);
    jw_key_str(w, "service", db_field(r, i, "service"));
    jw_key(w, "myAmount");
    jw_money(w, mine);
    jw_key(w, "winningAmount");
    jw_money(w, winning);
    jw_key(w, "delta");
    jw_money(w, mine - winning);
    jw_key(w, "date");
    jw_cell_iso(w, db_field(r, i, "won_at"));
    jw_obj_end(w);
  }
  jw_arr_end(w);
}

/* Member serviceExpansion: the services the provider does not offer, by estimated income. */
static void service_expansion(jw *w, const db_res *open, json_t *offered, const quote_market *m) {
  int64_t jobs[NSERVICES] = {0};
  for (int i = 0; i < open->rows; i++) {
    int s = service_index(db_field(open, i, "service"));
    if (s >= 0) jobs[s] += cell_int(open, i, "open_jobs");
  }
  int order[NSERVICES], n = 0;
  for (int s = 0; s < NSERVICES; s++)
    if (!contains_str(offered, SERVICE_NAMES[s])) order[n++] = s;
  for (int x = 1; x < n; x++) /* most estimated income first, then most open jobs */
    for (int y = x; y > 0; y--) {
      int p = order[y - 1], c = order[y];
      int64_t ip = jobs[p] * rate_of(m, SERVICE_NAMES[p]), ic = jobs[c] * rate_of(m, SERVICE_NAMES[c]);
      if (ic < ip || (ic == ip && jobs[c] <= jobs[p])) break;
      order[y - 1] = c, order[y] = p;
    }
  jw_key(w, "serviceExpansion");
  jw_arr(w);
  for (int k = 0; k < n; k++) {
    int s = order[k];
    jw_pack(w, "{s:s,s:I,s:M}", "service", SERVICE_NAMES[s], "openJobs", jobs[s], "estimatedMonthlyIncome",
            jobs[s] * rate_of(m, SERVICE_NAMES[s]));
  }
  jw_arr_end(w);
}

static bool insured(const char *status) { return status && (!strcmp(status, "active") || !strcmp(status, "review")); }

err_t api_providers_premium_insights(hs_req *req) {
  arena *a = &req->arena;
  const char *id = req->auth.id;
  db_res *pro, *quotes, *lost, *open, *local;
  err_t e = prov_store_get(a, id, &pro);
  if (e) return hs_found_or_fail(req, e, "Provider");
  if (!is_set(db_field(pro, 0, "is_premium")))
    return hs_fail_code(req, ERR_FORBIDDEN, "premium_required", "Premium insights are for Preferred Pro members");
  json_t *zips = arena_json(a, jx_parse_or(db_field(pro, 0, "service_zips"), json_array()));
  json_t *services = arena_json(a, jx_parse_or(db_field(pro, 0, "services"), json_array()));
  quote_market m[NSERVICES];
  for (int s = 0; s < NSERVICES; s++)
    if ((e = quotes_market(a, SERVICE_NAMES[s], &m[s])) != ERR_OK) return e;
  zip_demand *demand;
  int ndemand;
  if ((e = zip_demands(a, id, zips, m, &demand, &ndemand)) != ERR_OK) return e;
  if ((e = prov_store_quotes(a, id, &quotes)) != ERR_OK ||
      (e = prov_store_lost_bids(a, id, LOST_BIDS, &lost)) != ERR_OK ||
      (e = prov_store_open_jobs_by_service(a, id, &open)) != ERR_OK ||
      (e = prov_store_local_completed(a, id, &local)) != ERR_OK)
    return e;
  int64_t total = cell_int(local, 0, "total"), by_insured = cell_int(local, 0, "insured");
  jw *w = hs_jw(req, 4096);
  jw_obj(w);
  jw_key(w, "currentZips");
  jw_json(w, db_field(pro, 0, "service_zips") ? db_field(pro, 0, "service_zips") : "[]");
  zip_expansion(w, demand, ndemand);
  pricing_trends(w, quotes, services, m);
  lost_bids(w, lost);
  jw_key(w, "insuranceOpportunity");
  jw_pack(w, "{s:I,s:I,s:I,s:b}", "totalCompleted", total, "wonByInsured", by_insured, "pct",
          (int64_t)(total ? llround(100.0 * by_insured / total) : 0), "providerHasInsurance",
          insured(db_field(pro, 0, "ins_check_status")));
  service_expansion(w, open, services, m);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* Money given back: refunds (POST /staff/payments/:jobId/refund, and the service's own), the
 * job's payment history, and charges made twice.
 *
 * A refund is a request like any other (payments_ops.h): its payment_refunds row (amount,
 * reason, who) and the payment's pending_op "refund" are written in one transaction before the
 * processor is called, under a key of its own, and its outcome is recorded only while the
 * payment still names it. A refund whose answer was lost is looked up at the processor by
 * that key (refunds carry it in metadata) before it is repeated. The staff's refund key comes
 * from the request's Idempotency-Key when there is one, so a retry after a 503 settles the
 * same refund rather than making another. A refund made at the processor directly arrives by
 * webhook (payments_webhook.c) and is recorded by its processor id, once.
 *
 * A job that goes back to PENDING moves its payments to its history (pay_store_history_in, in
 * the transaction that reopens it); each is then given back here in the background ("payment_
 * release"): a hold voided, captured money (a tip too) refunded in full. A charge that
 * duplicates a recorded one is recorded in the history the same way and refunded. */
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_ops.h"
#include "ext/digest.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define KEY_LEN 96
#define MAX_REFUNDS 100 /* a charge's refunds looked through for a key */

static const char REOPENED[] = "Your job is open for quotes again; the next accepted quote is authorized afresh.";
static const char DUPLICATE[] = "The same payment was charged twice; the second charge is refunded.";

static bool is(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* The refund the processor made under idem_key for intent: PAY_OK, PAY_NOT_FOUND, or why it
 * could not be asked. */
static pay_rc find_refund(const char *intent, const char *idem_key, pay_refund *out, pay_error *pe) {
  pay_refund list[MAX_REFUNDS];
  int n;
  pay_rc rc = payments_list_refunds(intent, list, MAX_REFUNDS, &n, pe);
  if (rc != PAY_OK) return rc == PAY_NOT_FOUND ? PAY_UNAVAILABLE : rc;
  for (int i = 0; i < n; i++)
    if (!strcmp(list[i].idem_key, idem_key)) return *out = list[i], PAY_OK;
  return PAY_NOT_FOUND;
}

err_t pay_run_refund(arena *a, const payment_row *p, bool settling) {
  refund_row f;
  bool found, moved;
  err_t e = pay_store_refund_by_key(a, p->idem_key, &f, &found);
  if (e != ERR_OK) return e;
  if (!found) { /* never written without its row: nothing to carry out */
    log_json(LOG_ERROR, "a pending refund has no record",
             json_pack("{s:s,s:s}", "paymentId", p->id, "key", p->idem_key));
    return pay_store_settle_refund(p, NULL, "refund_missing: The refund was not recorded.", NULL, &moved);
  }
  pay_refund out;
  pay_error pe = {0}, asked;
  pay_rc rc = settling ? find_refund(p->intent_id, p->idem_key, &out, &asked) : PAY_NOT_FOUND;
  if (rc == PAY_NOT_FOUND)
    rc = payments_refund(p->intent_id, f.amount_cents,
                         is(f.source, "duplicate") ? "duplicate" : "requested_by_customer", p->idem_key, &out, &pe);
  if ((rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) &&
      find_refund(p->intent_id, p->idem_key, &out, &asked) == PAY_OK)
    rc = PAY_OK;
  if (rc == PAY_UNAVAILABLE || rc == PAY_IDEMPOTENCY) return pay_leave(p);
  bool made = rc == PAY_OK && (is(out.status, "succeeded") || is(out.status, "pending"));
  const char *why = NULL;
  if (!made)
    why = arena_printf(a, "%s: %s",
                       pe.code[0]     ? pe.code
                       : rc == PAY_OK ? out.status
                                      : "refund_refused",
                       pe.message[0] ? pe.message : "The payment processor did not make the refund.");
  log_json(made ? LOG_INFO : LOG_WARN, "refund recorded",
           json_pack("{s:s,s:s,s:I,s:s,s:s?}", "paymentId", p->id, "jobId", p->job_id, "cents",
                     (json_int_t)f.amount_cents, "source", f.source, "refused", why));
  return pay_store_settle_refund(p, made ? out.id : NULL, why,
                                 made ? pay_refund_news(a, p, f.amount_cents, f.reason) : NULL, &moved);
}

/* Starts refund f (its id, key, amount, reason, source and staff set) of payment p and carries
 * it out. ERR_CONFLICT when p changed meanwhile (nothing was written); ERR_UNAVAILABLE when
 * the processor's answer is not known yet (the refund is settled later). */
static err_t refund_now(arena *a, const payment_row *p, const refund_row *f, const audit_action *act) {
  bool claimed;
  err_t e = pay_store_claim_refund(p, f, act, &claimed);
  if (e != ERR_OK) return e;
  return claimed ? pay_run_claimed(a, p->id, false) : ERR_CONFLICT;
}

/* A refund row of source and reason for cents of p, under key (NULL: one of its own). */
static refund_row new_refund(arena *a, const payment_row *p, int64_t cents, const char *reason, const char *source,
                             const char *staff_id, const char *key) {
  char *id = arena_alloc(a, ID_LEN + 1);
  id_new(id);
  return (refund_row){.id = id,
                      .payment_id = p->id,
                      .reason = reason,
                      .source = source,
                      .staff_id = staff_id,
                      .idem_key = key ? key : arena_printf(a, "refund-%s", id),
                      .amount_cents = cents};
}

/* One step of giving back history payment p: ERR_OK with *again when p moved on and must be
 * read again (a void that found the hold captured makes it PAID, to refund). */
static err_t release_step(arena *a, payment_row *p, bool *again) {
  *again = false;
  if (p->pending_op) { /* its request first: it may hold or move money */
    err_t e = pay_take_over(a, p, db_lease_over());
    if (e == ERR_OK) *again = true;
    return e;
  }
  if (is(p->status, "AUTHORIZED")) {
    err_t e = pay_attempt(a, p, "void", NULL, 0);
    if (e == ERR_OK) *again = true;
    return e;
  }
  if (!is(p->status, "PAID") || p->refunded_cents >= p->amount_cents) return ERR_OK;
  bool duplicate = is(p->kind, "duplicate");
  refund_row f = new_refund(a, p, p->amount_cents - p->refunded_cents, duplicate ? DUPLICATE : REOPENED,
                            duplicate ? "duplicate" : "job_reopened", NULL, NULL);
  err_t e = refund_now(a, p, &f, NULL);
  return e == ERR_CONFLICT ? ERR_UNAVAILABLE : e; /* moved meanwhile: look again later */
}

err_t pay_release_one(const char *payment_id) {
  arena a;
  arena_init(&a);
  payment_row p;
  bool found, again = true;
  err_t e = ERR_OK;
  for (int pass = 0; e == ERR_OK && again && pass < 3; pass++) {
    if ((e = pay_store_get(&a, payment_id, &p, &found)) != ERR_OK || !found || !p.released_at) break;
    e = release_step(&a, &p, &again);
  }
  if (e == ERR_OK && again) e = ERR_UNAVAILABLE; /* still moving: the queue or the reconciliation looks again */
  arena_fini(&a);
  return e;
}

void pay_refund_duplicate(arena *a, const payment_row *p, const char *intent, int64_t cents) {
  const char *id;
  if (pay_store_record_duplicate(a, p, intent, cents, &id) != ERR_OK) {
    log_json(LOG_ERROR, "a second charge could not be recorded: refund it by hand",
             json_pack("{s:s,s:s}", "paymentId", p->id, "intent", intent));
    return;
  }
  if (pay_release_one(id) == ERR_UNAVAILABLE) pay_queue("payment_release", "paymentId", id);
}

bool pay_release_from_queue(json_t *payload, char err[256]) {
  const char *id = json_string_value(json_object_get(payload, "paymentId"));
  err_t e = id ? pay_release_one(id) : ERR_OK;
  if (e == ERR_OK) return true;
  snprintf(err, 256, e == ERR_UNAVAILABLE ? "payment busy or processor unavailable" : "cannot give the payment back");
  return false;
}

db_rc payments_release_provider_jobs_in(db_conn *c, const char *provider_id) {
  int released;
  return pay_store_history_in(c, NULL, provider_id, false, &released);
}

/* ---- POST /staff/payments/:jobId/refund ---- */

/* The refund's key for payment p: from the request's Idempotency-Key when it has one (a retry
 * is the same refund), else one of its own (NULL). */
static const char *staff_refund_key(hs_req *req, const payment_row *p) {
  if (!req->idem_key) return NULL;
  char digest[65];
  const char *scoped = arena_printf(&req->arena, "%s\n%s", req->idem_scope ? req->idem_scope : "", req->idem_key);
  sha256_hex(scoped, strlen(scoped), digest);
  digest[24] = 0;
  return arena_printf(&req->arena, "refund-%s-%s", p->id, digest);
}

static const char PENDING_MESSAGE[] = "A refund of this payment is still being settled";

/* A refund as the answer shows it. */
static void refund_jw(jw *w, const refund_row *f, const char *target) {
  jw_pack(w, "{s:s,s:s,s:M,s:s,s:s,s:s,s:T}", "id", f->id, "target", target, "amount", f->amount_cents, "reason",
          f->reason, "providerShare", f->provider_share ? f->provider_share : "prorata", "status", "SUCCEEDED",
          "createdAt", f->created_at);
}

/* Member key: the Payment JSON of the job's current payment of kind, or null. */
static err_t job_payment_jw(jw *w, arena *a, const char *key, const char *job_id, const char *kind) {
  db_res *r;
  err_t e = pay_store_find_rows(a, job_id, kind, &r);
  if (e != ERR_OK) return e;
  jw_key(w, key);
  r->rows == 1 ? hs_rj_object(w, hs_rj_bind(a, PAYMENTS_JSON, r), r, 0) : jw_null(w);
  return ERR_OK;
}

/* The refund f as its request ends: made, or the error it came to (a refund whose outcome is
 * not known yet is being settled in the background: 503). */
static err_t refund_outcome(hs_req *req, const refund_row *f) {
  if (is(f->status, "PENDING")) return hs_fail(req, ERR_UNAVAILABLE, "Payment processor unavailable");
  if (is(f->status, "FAILED"))
    return hs_fail(req, ERR_CONFLICT,
                   arena_printf(&req->arena, "The payment processor refused the refund (%s)", f->failure_reason));
  return ERR_OK;
}

/* One payment's part of a staff refund. */
typedef struct refund_part {
  const char *target; /* "job" or "tip" */
  payment_row p;
  bool found;
  const char *key;
  refund_row made; /* after the refund */
} refund_part;

/* Whether p has a refund whose outcome is not known yet; one whose carrier is gone is set
 * settling in the background (the reconciliation would find it too). */
static bool refund_unsettled(const payment_row *p) {
  if (!is(p->pending_op, "refund")) return false;
  if (p->op_started_at < db_lease_over()) pay_queue("payment_settle", "paymentId", p->id);
  return true;
}

/* Whether p's latest dispute is open (the processor refuses a refund of a disputed charge). */
static bool disputed(const payment_row *p) {
  json_t *d = p->dispute_json ? json_loads(p->dispute_json, 0, NULL) : NULL;
  const char *status = json_string_value(json_object_get(d, "status"));
  bool open = status && strcmp(status, "won") && strcmp(status, "lost") && strcmp(status, "warning_closed");
  json_decref(d);
  return open;
}

#define SETTLE_WAIT_MS 3000

/* A retry of part's refund (its key) whose outcome is not known: settled now by asking the
 * processor (its carrier is gone), or waited for a moment while another settles it; part->made
 * as it stands after. */
static err_t settle_retried(hs_req *req, refund_part *part) {
  int64_t until = clock_mono_ms() + SETTLE_WAIT_MS;
  bool found, asked = false;
  err_t e = ERR_OK;
  while (e == ERR_OK && is(part->made.status, "PENDING") && clock_mono_ms() < until) {
    if ((e = pay_store_get(&req->arena, part->p.id, &part->p, &found)) != ERR_OK || !found) break;
    bool mine = is(part->p.idem_key, part->key) && part->p.pending_op;
    if (mine && part->p.op_started_at < db_lease_over() && asked) break; /* asked once: still unknown */
    if (mine && part->p.op_started_at < db_lease_over())
      asked = true, pay_take_over(&req->arena, &part->p, db_lease_over()); /* asks the processor first */
    else if (is(part->p.idem_key, part->key) && part->p.pending_op)
      usleep(100 * 1000); /* the background settles it */
    e = pay_store_refund_by_key(&req->arena, part->key, &part->made, &found);
    if (e == ERR_OK && is(part->made.status, "PENDING") && !part->p.pending_op) break; /* not under way: lost */
  }
  return e;
}

/* Makes part's refund of cents; ERR_OK when made, else the request has failed. */
static err_t refund_part_now(hs_req *req, refund_part *part, int64_t cents, const char *reason, const char *share) {
  const char *job_id = part->p.job_id;
  refund_row f = new_refund(&req->arena, &part->p, cents, reason, "staff", req->auth.id, part->key);
  f.provider_share = share;
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:s}", "jobId", job_id, "paymentId",
                                                     part->p.id, "refundId", f.id, "target", part->target, "amount",
                                                     jx_money(cents), "reason", f.reason, "providerShare", share));
  audit_action act = {req->auth.id, req->auth.role, "payment.refund", part->p.id, "payment", detail};
  bool found;
  err_t e = refund_now(&req->arena, &part->p, &f, &act);
  if (e == ERR_CONFLICT) return hs_fail(req, e, "The payment changed meanwhile; try again");
  if (e != ERR_OK && e != ERR_UNAVAILABLE) return e;
  bool unknown = e == ERR_UNAVAILABLE;
  e = pay_store_refund_by_key(&req->arena, f.idem_key, &part->made, &found);
  /* settled when it can be, queued once the answer is read: a settling that ran first could
   * answer this request with what it found instead of its own outcome (a test saw 200 for 503) */
  if (unknown) pay_queue("payment_settle", "paymentId", part->p.id);
  if (e != ERR_OK) return e;
  return found ? refund_outcome(req, &part->made) : ERR_INTERNAL;
}

err_t payments_staff_refund(hs_req *req, const payments_refund_ask *ask, jw *answer) {
  const char *job_id = ask->job_id;
  const char *target = ask->target ? ask->target : "job",
             *share = ask->provider_share ? ask->provider_share : "prorata";
  bool all = is(target, "all");
  if (all && ask->cents > 0)
    return hs_fail_invalid(req, "amount: is not allowed with target all (everything left is refunded)");
  pay_context cx;
  err_t e = pay_store_context(&req->arena, job_id, &cx);
  if (e == ERR_NOT_FOUND) return hs_not_found(req, "Job");
  refund_part parts[2] = {{.target = is(target, "tip") ? "tip" : "job"}, {.target = "tip"}};
  int n = all ? 2 : 1;
  for (int i = 0; e == ERR_OK && i < n; i++)
    e = pay_store_find(&req->arena, job_id, parts[i].target, &parts[i].p, &parts[i].found);
  if (e != ERR_OK) return e;
  for (int i = 0; i < n; i++) {
    bool captured = parts[i].found && (is(parts[i].p.status, "PAID") || is(parts[i].p.status, "REFUNDED"));
    if (!captured && i == 0)
      return hs_fail(req, ERR_NOT_FOUND,
                     is(parts[0].target, "tip") ? "This job has no captured tip" : "This job has no captured payment");
    parts[i].found = captured;
    if (captured)
      parts[i].key = ask->key ? arena_printf(&req->arena, "refund-%s-%s", parts[i].p.id, ask->key)
                              : staff_refund_key(req, &parts[i].p);
  }
  /* a retry of a refund (its key) is answered as that refund stands */
  bool replayed = false;
  for (int i = 0; i < n; i++) {
    bool found;
    if (!parts[i].found || !parts[i].key) continue;
    if ((e = pay_store_refund_by_key(&req->arena, parts[i].key, &parts[i].made, &found)) != ERR_OK) return e;
    if (!found) continue;
    replayed = true;
    if (is(parts[i].made.status, "PENDING") && (e = settle_retried(req, &parts[i])) != ERR_OK) return e;
    if (is(parts[i].made.status, "PENDING"))
      return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_REFUND_PENDING, PENDING_MESSAGE);
    if ((e = refund_outcome(req, &parts[i].made)) != ERR_OK) return e;
  }
  if (!replayed) {
    for (int i = 0; i < n; i++) /* an earlier refund not settled yet: a retry could refund twice */
      if (parts[i].found && refund_unsettled(&parts[i].p))
        return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_REFUND_PENDING, PENDING_MESSAGE);
    for (int i = 0; i < n; i++) {
      if (parts[i].found && parts[i].p.pending_op)
        return hs_fail(req, ERR_CONFLICT, "Another operation on this payment is under way; try again");
      if (parts[i].found && disputed(&parts[i].p))
        return hs_fail(req, ERR_CONFLICT, "This payment is disputed: answer the dispute instead of refunding it");
    }
    int64_t left = parts[0].p.amount_cents - parts[0].p.refunded_cents - parts[0].p.lost_cents;
    if (left <= 0 && (!all || !parts[1].found || parts[1].p.amount_cents <= parts[1].p.refunded_cents))
      return hs_fail(req, ERR_CONFLICT, "Nothing left to refund");
    int64_t cents = ask->cents > 0 ? ask->cents : left;
    if (cents > left)
      return hs_fail_invalid(req,
                             arena_printf(&req->arena, "amount: must be between 0.01 and %.2f", (double)left / 100));
    for (int i = 0; i < n; i++) {
      int64_t rest = parts[i].p.amount_cents - parts[i].p.refunded_cents - parts[i].p.lost_cents;
      if (!parts[i].found || rest <= 0) {
        parts[i].found = false;
        continue;
      }
      if ((e = refund_part_now(req, &parts[i], i == 0 ? cents : rest, ask->reason, share)) != ERR_OK) return e;
    }
  }
  const refund_part *first = NULL;
  for (int i = 0; i < n && !first; i++)
    if (parts[i].found && parts[i].made.id) first = &parts[i];
  jw_obj(answer);
  jw_key(answer, "refund");
  first ? refund_jw(answer, &first->made, first->target) : jw_null(answer);
  jw_key(answer, "refunds");
  jw_arr(answer);
  for (int i = 0; i < n; i++)
    if (parts[i].found && parts[i].made.id) refund_jw(answer, &parts[i].made, parts[i].target);
  jw_arr_end(answer);
  if ((e = job_payment_jw(answer, &req->arena, "payment", job_id, "job")) != ERR_OK ||
      (e = job_payment_jw(answer, &req->arena, "tip", job_id, "tip")) != ERR_OK)
    return e;
  jw_obj_end(answer);
  return ERR_OK;
}

err_t api_payments_refund(hs_req *req) {
  payments_refund_ask ask = {
      .job_id = hs_param(req, "jobId"),
      .target = hs_body_has(req, "target") ? hs_body_str(req, "target") : "job",
      .reason = hs_body_str(req, "reason"),
      .provider_share = hs_body_has(req, "providerShare") ? hs_body_str(req, "providerShare") : "prorata",
      .cents = hs_body_has(req, "amount") ? jx_cents(json_number_value(json_object_get(req->body, "amount"))) : 0};
  jw *w = hs_jw(req, 2048);
  err_t e = payments_staff_refund(req, &ask, w);
  return e == ERR_OK ? hs_ok_jw(req, w) : e;
}

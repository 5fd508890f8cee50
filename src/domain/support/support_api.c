/* Support requests and the technical-support ticket desk.
 *
 * Ticket moves (PATCH /staff/tickets/:id): OPEN -> IN_PROGRESS, RESOLVED or CLOSED;
 * IN_PROGRESS -> OPEN (handed back, unassigned), RESOLVED or CLOSED; RESOLVED -> IN_PROGRESS
 * (reopened) or CLOSED; CLOSED is final. A ticket may be set to the status it has (IN_PROGRESS
 * again takes it over). IN_PROGRESS assigns the caller; entering RESOLVED or CLOSED from an
 * open status sets resolvedAt (RESOLVED -> CLOSED keeps it); reopening clears it. Notes may be
 * changed in any status. Any other move is 409. */
#include "domain/support/support_api.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/audit/audit.h"
#include "domain/auth/auth.h"
#include "domain/support/support.h"
#include "domain/support/support_store.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

err_t api_support_open(hs_req *req) {
  const char *role = hs_role_name(req->auth.role_bit);
  account_card acc;
  err_t e = auth_account_get(&req->arena, role, req->auth.id, &acc);
  if (e) return hs_found_or_fail(req, e, "Account");
  const char *subject = hs_body_str(req, "subject"), *body = hs_body_str(req, "body");
  const char *category = hs_body_str(req, "category");
  char id[ID_LEN + 1];
  id_new(id);
  char *mail_subject = arena_printf(&req->arena, "[Support: %s] %s", category, subject);
  char *mail_body = arena_printf(&req->arena,
                                 "Support request from a %s.\n\nName: %s\nEmail: %s\nAccount: %s\nCategory: %s\n"
                                 "Ticket: %s\nSubject: %s\n\n%s\n",
                                 !strcmp(role, "user") ? "customer" : "provider", acc.name, acc.email, acc.id, category,
                                 id, subject, body);
  e = support_store_open(id, acc.id, role, subject, body, category, mail_subject, mail_body);
  return e == ERR_OK ? hs_ok_pack(req, "{s:b}", "ok", 1) : e;
}

/* The Ticket JSON, from field tables; account and assignedTo are { name, email } or null. */
static const hs_rj_field TICKET_HEAD[] = {
    {"id", "id", RJ_STR}, {"accountId", "account_id", RJ_STR}, {"accountRole", "account_role", RJ_STR}, {0}};
static const hs_rj_field TICKET_MID[] = {{"subject", "subject", RJ_STR},
                                         {"body", "body", RJ_STR},
                                         {"category", "category", RJ_STR},
                                         {"status", "status", RJ_STR},
                                         {"notes", "notes", RJ_STR},
                                         {"assignedToId", "assigned_to_id", RJ_STR},
                                         {0}};
static const hs_rj_field TICKET_TAIL[] = {{"resolvedAt", "resolved_at", RJ_ISO},
                                          {"createdAt", "created_at", RJ_ISO},
                                          {"updatedAt", "updated_at", RJ_ISO},
                                          {0}};
static const hs_rj_field PERSON[] = {{"name", "name", RJ_STR}, {"email", "email", RJ_STR}, {0}};

typedef struct ticket_cols {
  hs_rj *head, *account, *mid, *assignee, *tail;
  int account_name, assignee_name;
} ticket_cols;

static void ticket_bind(arena *a, const db_res *r, ticket_cols *b) {
  b->head = hs_rj_bind(a, TICKET_HEAD, r), b->mid = hs_rj_bind(a, TICKET_MID, r);
  b->tail = hs_rj_bind(a, TICKET_TAIL, r);
  b->account = hs_rj_bind_as(a, PERSON, r, "account_"), b->assignee = hs_rj_bind_as(a, PERSON, r, "assignee_");
  b->account_name = db_col(r, "account_name"), b->assignee_name = db_col(r, "assignee_name");
}

static void person(jw *w, const hs_rj *b, const db_res *r, int i, int name_col) {
  if (db_text(r, i, name_col))
    hs_rj_object(w, b, r, i);
  else
    jw_null(w);
}

static void ticket_write(jw *w, const ticket_cols *b, const db_res *r, int i) {
  jw_obj(w);
  hs_rj_members(w, b->head, r, i);
  jw_key(w, "account");
  person(w, b->account, r, i, b->account_name);
  hs_rj_members(w, b->mid, r, i);
  jw_key(w, "assignedTo");
  person(w, b->assignee, r, i, b->assignee_name);
  hs_rj_members(w, b->tail, r, i);
  jw_obj_end(w);
}

/* Answers the ticket of r's first row. */
static err_t ticket_reply(hs_req *req, const db_res *r) {
  ticket_cols b;
  ticket_bind(&req->arena, r, &b);
  jw *w = hs_jw(req, 1024);
  ticket_write(w, &b, r, 0);
  return hs_ok_jw(req, w);
}

err_t api_tickets_list(hs_req *req) {
  const char *status = json_string_value(json_object_get(req->query, "status"));
  db_page pg;
  db_res *r;
  err_t e = hs_page_begin(req, &TICKETS_KEYSET, NULL, TICKET_LIST_LIMIT, &pg);
  if (!e) e = support_store_list(&req->arena, status ? status : "OPEN", status ? status : "IN_PROGRESS", &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  if (e != ERR_OK) return e;
  ticket_cols b;
  ticket_bind(&req->arena, r, &b);
  jw *w = hs_jw(req, 1024 * (size_t)(r->rows + 1));
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) ticket_write(w, &b, r, i);
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

static bool move_allowed(const char *from, const char *to) {
  static const struct {
    const char *from, *to;
  } moves[] = {
      {"OPEN", "IN_PROGRESS"},     {"OPEN", "RESOLVED"},      {"OPEN", "CLOSED"},          {"IN_PROGRESS", "OPEN"},
      {"IN_PROGRESS", "RESOLVED"}, {"IN_PROGRESS", "CLOSED"}, {"RESOLVED", "IN_PROGRESS"}, {"RESOLVED", "CLOSED"},
  };
  if (!strcmp(from, to)) return true;
  for (size_t i = 0; i < ARRAY_LEN(moves); i++)
    if (!strcmp(moves[i].from, from) && !strcmp(moves[i].to, to)) return true;
  return false;
}

static bool is_resolved(const char *status) { return !strcmp(status, "RESOLVED") || !strcmp(status, "CLOSED"); }

err_t api_tickets_update(hs_req *req) {
  const char *id = hs_param(req, "id");
  db_res *r;
  err_t e = support_store_get(&req->arena, id, &r);
  if (e) return hs_found_or_fail(req, e, "Ticket");
  const char *from = db_field(r, 0, "status"), *to = hs_body_str(req, "status"), *notes = hs_body_str(req, "notes");
  if (!to && !notes) return ticket_reply(req, r);
  if (!to) to = from;
  if (!move_allowed(from, to))
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE,
                        arena_printf(&req->arena, "A ticket cannot move from %s to %s", from, to));
  const char *resolved = db_field(r, 0, "resolved_at");
  ticket_update u = {to, db_field(r, 0, "assigned_to_id"), notes ? notes : db_field(r, 0, "notes"),
                     resolved ? strtoll(resolved, NULL, 10) : 0};
  if (!strcmp(to, "IN_PROGRESS")) u.assigned_to_id = req->auth.id;
  if (!strcmp(to, "OPEN")) u.assigned_to_id = NULL;
  if (!is_resolved(to))
    u.resolved_at = 0;
  else if (!is_resolved(from))
    u.resolved_at = clock_now_ms();
  json_t *detail = arena_json(&req->arena, json_pack("{s:s,s:s,s:b}", "from", from, "to", to, "notes", notes != NULL));
  audit_action act = {req->auth.id, req->auth.role, "ticket.update", id, "ticket", detail};
  bool moved;
  if (support_store_update(id, from, &u, &act, &moved) != ERR_OK) return ERR_INTERNAL;
  if (!moved) return hs_fail(req, ERR_CONFLICT, "The ticket changed meanwhile; try again");
  if (support_store_get(&req->arena, id, &r) != ERR_OK) return ERR_INTERNAL;
  return ticket_reply(req, r);
}

/* ---- the account's part (domain/domain.h) ---- */

static const hs_rj_field TICKET[] = {
    {"id", "id", RJ_STR},
    {"subject", "subject", RJ_STR},
    {"body", "body", RJ_STR},
    {"category", "category", RJ_STR},
    {"status", "status", RJ_STR},
    {"notes", "notes", RJ_STR},
    {"resolvedAt", "resolved_at", RJ_ISO},
    {"createdAt", "created_at", RJ_ISO},
    {"updatedAt", "updated_at", RJ_ISO},
    {0},
};

const account_part SUPPORT_EXPORT_PARTS[] = {{"supportTickets", SUPPORT_EXPORT_SQL, TICKET}, {0}};

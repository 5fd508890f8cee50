// Screens every role has: home (what waits for the role), the own audit trail, the elevations
// (request, start an impersonation session, end it) and the impersonation session's pages.
import { api, asTarget, currentImpersonation, currentSession, data, isSupport, startImpersonation, tokenExpiry, type Schemas } from "./api";
import { barChart } from "./charts";
import { badge, dl, errorBox, field, fill, h, input, loading, money, nextCursor, onSubmit, pagedList, select, table, when } from "./dom";
import { endImpersonation } from "./banner";
import { flash } from "./main";
import type { Ctx } from "./routes";

type Elevation = Schemas["ElevationRequest"];

function card(title: string, body: Node | string, href?: string, linkText?: string): HTMLElement {
  return h("section", { class: "card" }, h("h2", null, title), typeof body === "string" ? h("p", null, body) : body,
    href ? h("p", null, h("a", { href }, linkText ?? "Open")) : null);
}

function count(n: number, more: boolean, word: string): string {
  return `${n}${more ? "+" : ""} ${word}`;
}

export function home(): Node {
  const s = currentSession();
  const box = h("div", { class: "cards" });
  if (!s) return box;
  box.append(h("p", { class: "lead" }, `Signed in as ${s.name} (${s.email}). Here is what waits for you.`));
  const slot = (title: string, href: string, linkText: string, work: Promise<Node>) => {
    const body = h("div");
    box.append(card(title, body, href, linkText));
    void loading(body, work, (n) => n);
  };
  if (s.role === "customer_support") {
    slot("Open reports", "/portal/reports", "Work the reports", api.GET("/staff/reports", { params: { query: { status: "open", limit: 100 } } }).then((r) => {
      const rows = data(r);
      const held = rows.reduce((sum, x) => sum + x.heldTransfers.reduce((a, t) => a + t.amount, 0), 0);
      return h("p", null, `${count(rows.length, !!nextCursor(r.response), "open reports")} holding ${money(held)}.`);
    }));
    slot("Open disputes", "/portal/disputes", "Answer the disputes", api.GET("/staff/disputes", { params: { query: { status: "open", limit: 100 } } }).then((r) => {
      const rows = data(r);
      const amount = rows.reduce((sum, x) => sum + x.amount, 0);
      const due = rows.filter((x) => x.evidenceDueBy && !x.evidenceSubmittedAt).length;
      return h("div", null, h("p", null, `${count(rows.length, !!nextCursor(r.response), "open disputes")} for ${money(amount)}; ${due} awaiting evidence.`),
        rows.length ? barChart("Disputed money by status", ["Awaiting evidence", "Under review"],
          [{ name: "Amount", values: [rows.filter((x) => !x.evidenceSubmittedAt).reduce((a, x) => a + x.amount, 0), rows.filter((x) => x.evidenceSubmittedAt).reduce((a, x) => a + x.amount, 0)] }], money) : null);
    }));
  }
  if (s.role === "technical_support") {
    slot("Open tickets", "/portal/tickets", "Answer the tickets", api.GET("/staff/tickets", { params: { query: { limit: 100 } } }).then((r) => {
      const rows = data(r);
      const mine = rows.filter((t) => t.assignedToId === s.id).length;
      return h("p", null, `${count(rows.length, !!nextCursor(r.response), "open or in-progress tickets")}, ${mine} assigned to you.`);
    }));
  }
  if (s.role === "internal_audit") {
    slot("Staff sessions", "/portal/audit", "Review the sessions", api.GET("/staff/audit/sessions", { params: { query: { limit: 100 } } }).then((r) => {
      const rows = data(r);
      const sessions = rows.reduce((a, x) => a + x.sessions.length, 0);
      const events = rows.reduce((a, x) => a + x.sessions.reduce((b, y) => b + y.events.length, 0), 0);
      return h("p", null, `${rows.length} staff members, ${sessions} elevations, ${events} recorded requests.`);
    }));
  }
  if (s.role === "admin") {
    slot("Elevations waiting for approval", "/portal/admin/elevations", "Approve or deny", api.GET("/admin/elevations", { params: { query: { status: "PENDING", limit: 100 } } }).then((r) =>
      h("p", null, `${count(data(r).length, !!nextCursor(r.response), "pending requests")}.`)));
  } else {
    slot("Your elevations", "/portal/elevations", "See your elevations", api.GET("/staff/elevation", { params: { query: { limit: 100 } } }).then((r) => {
      const rows = data(r);
      const by = (st: string) => rows.filter((e) => e.status === st).length;
      return h("p", null, `${by("PENDING")} pending, ${by("APPROVED")} approved and ready to start, ${by("ACTIVE")} active.`);
    }));
  }
  if (s.role === "professional_support") box.append(card("Providers", "Find a provider by name, email or company to see its documents, jobs and ledger.", "/portal/providers", "Find a provider"));
  if (s.role === "customer_support") box.append(card("Customers", "Find a customer by email, name or id to see their jobs, payments and refunds.", "/portal/customers", "Find a customer"));
  return box;
}

function statusBadge(status: string): HTMLElement {
  const kind = /ACTIVE|APPROVED|PAID|SUCCEEDED|won|paid|active|passed/.test(status) ? "ok"
    : /REJECTED|FAILED|lost|failed|expired|CANCEL/.test(status) ? "bad" : "";
  return badge(status, kind);
}
export { statusBadge };

async function startSession(e: Elevation, ctx: Ctx): Promise<void> {
  const r = data(await api.POST("/staff/impersonate", { body: { elevationId: e.id } }));
  startImpersonation({ token: r.token, identity: r.identity, elevationId: e.id, expiresAt: tokenExpiry(r.token, 15 * 60e3), actions: [] });
  ctx.go("/portal/session");
}

export function elevations(ctx: Ctx): Node {
  const s = currentSession();
  const out = h("div");
  if (isSupport(s?.role)) out.append(h("p", null, h("a", { href: "/portal/elevations/new", class: "button" }, "Request an elevation")));
  out.append(pagedList<Elevation>("Your elevation requests, newest first", [
    ["Account", (e) => h("span", null, `${e.targetRole === "user" ? "Customer" : "Provider"} `, h("code", null, e.targetId))],
    ["Reason", (e) => e.reason],
    ["Status", (e) => statusBadge(e.status)],
    ["Requested", (e) => when(e.createdAt)],
    ["Ends", (e) => when(e.expiresAt)],
    ["Actions", (e) => {
      const cell = h("div", { class: "actions" });
      if (e.status === "APPROVED" && isSupport(s?.role)) {
        cell.append(h("button", { type: "button", onclick: (ev: Event) => { const b = ev.currentTarget as HTMLButtonElement; b.disabled = true; startSession(e, ctx).catch((err) => { b.disabled = false; cell.append(errorBox(err)); }); } }, "Start session"));
      }
      if (e.status === "PENDING" || e.status === "APPROVED" || e.status === "ACTIVE") {
        cell.append(h("button", { type: "button", class: "secondary", "aria-label": `End the elevation ${e.id}`, onclick: async () => {
          try {
            await api.PATCH("/staff/elevation/{id}/deactivate", { params: { path: { id: e.id } } });
            if (currentImpersonation()?.elevationId === e.id) await endImpersonation();
            else ctx.refresh();
          } catch (err) { cell.append(errorBox(err)); }
        } }, "End"));
      }
      return cell;
    }],
  ], async (cursor) => {
    const r = await api.GET("/staff/elevation", { params: { query: { limit: 25, cursor } } });
    return { rows: data(r), next: nextCursor(r.response) };
  }, "You have no elevation requests."));
  return out;
}

export function requestElevation(ctx: Ctx): Node {
  const s = currentSession();
  const role = ctx.query.get("targetRole") ?? (s?.role === "professional_support" ? "provider" : "user");
  const form = h("form", { class: "card narrow", novalidate: true },
    h("p", null, "The administrator is emailed approve and deny links. Once approved, you may act as the account for 15 minutes; every request is recorded."),
    field("Account id", input("targetId", { value: ctx.query.get("targetId") ?? "", required: true })),
    field("Account type", select("targetRole", [["user", "Customer"], ["provider", "Provider"]], role)),
    field("Reason", h("textarea", { name: "reason", rows: 3, required: true, maxlength: 1000 })),
    h("button", { type: "submit" }, "Request the elevation"));
  onSubmit(form, async (fd) => {
    await api.POST("/staff/elevation", { body: { targetId: String(fd.get("targetId")), targetRole: fd.get("targetRole") === "provider" ? "provider" : "user", reason: String(fd.get("reason")) } });
    flash("Elevation requested: the administrator has been emailed.");
    ctx.go("/portal/elevations");
  });
  return form;
}

export function session(): Node {
  const imp = currentImpersonation();
  if (!imp) return h("p", null, "No impersonation session is running. Start one from ", h("a", { href: "/portal/elevations" }, "your elevations"), ".");
  const out = h("div");
  const profile = h("div"), jobs = h("div"), extra = h("div");
  out.append(h("section", { class: "card" }, h("h2", null, "Account"), profile));
  const extraLoads: Promise<void>[] = [];
  if (imp.identity.role === "user") {
    extraLoads.push(loading(profile, asTarget.GET("/users/me", {}), (r) => { const u = data(r); return dl([["Name", u.name], ["Email", u.email], ["Address", `${u.address ?? ""} ${u.zip ?? ""}`], ["Since", when(u.createdAt)]]); }));
  } else {
    extraLoads.push(loading(profile, asTarget.GET("/providers/me", {}), (r) => { const p = data(r); return dl([["Name", p.name], ["Email", p.email], ["Company", p.companyName ?? "—"], ["Since", when(p.createdAt)]]); }));
    out.append(h("section", { class: "card" }, h("h2", null, "Payout account and transfers"), extra));
    extraLoads.push(loading(extra, Promise.all([asTarget.GET("/providers/me/payout-account", {}), asTarget.GET("/providers/me/payouts", { params: { query: { limit: 50 } } })]), ([a, p]) => {
      const acct = data(a), pay = data(p);
      return h("div", null,
        dl([["Account", statusBadge(acct.status)], ["Payouts enabled", acct.payoutsEnabled ? "Yes" : "No"], ["Requirements", acct.requirements.join(", ") || "None"],
          ["Scheduled", money(pay.totals.scheduled)], ["On hold", money(pay.totals.onHold)], ["Paid", money(pay.totals.paid)], ["Reversed", money(pay.totals.reversed)], ["Balance", money(pay.totals.balance)]]),
        table("Transfers", [["Kind", (t) => t.kind], ["Amount", (t) => money(t.amount)], ["Status", (t) => statusBadge(t.status)], ["Available", (t) => when(t.availableAt)], ["Paid", (t) => when(t.paidAt)]], pay.transfers, "No transfers."));
    }));
  }
  out.append(h("section", { class: "card" }, h("h2", null, "Jobs"), jobs));
  const loads: Promise<void>[] = [];
  loads.push(loading(jobs, imp.identity.role === "user" ? asTarget.GET("/jobs", { params: { query: { limit: 50 } } }).then((r) => data(r).jobs) : asTarget.GET("/providers/me/jobs", {}).then((r) => data(r) as unknown as Schemas["Job"][]),
    (rows) => table("The account's jobs", [["Service", (j) => j.service], ["Status", (j) => statusBadge(j.status)], ["Created", (j) => when(j.createdAt)], ["Messages", (j) => h("a", { href: `/portal/session/jobs/${j.id}` }, `Messages of job ${j.id}`)]], Array.isArray(rows) ? rows : [], "No jobs.")));
  const logTable = h("div");
  const showLog = () => fill(logTable, table("Requests made as the account", [["Time", (a) => when(a.at)], ["Request", (a) => h("code", null, `${a.method} ${a.path}`)], ["Status", (a) => String(a.status)]], imp.actions, "No requests yet."));
  showLog();
  out.append(h("section", { class: "card" }, h("h2", null, "What this session did"),
    h("p", null, imp.elevationId ? "Every request below is recorded in the audit trail with the elevation." : "GODMODE impersonation: not an elevation."), logTable));
  void Promise.allSettled([...loads, ...extraLoads]).then(showLog); // this page's own requests, once answered
  return out;
}

export function sessionJob(ctx: Ctx): Node {
  const imp = currentImpersonation();
  if (!imp) return h("p", null, "No impersonation session is running: the messages of a job are read as its customer or provider, in a session. ", h("a", { href: "/portal/elevations" }, "Your elevations"));
  const id = ctx.params.id ?? "";
  return pagedList<Schemas["Message"]>(`Messages of job ${id}`, [
    ["From", (m) => `${m.senderName} (${m.senderRole === "user" ? "customer" : "provider"})`],
    ["Message", (m) => m.content.startsWith("[IMAGE]") ? h("img", { src: m.content.slice(7), alt: `Photo sent by ${m.senderName}`, class: "thumb" }) : m.content],
    ["Sent", (m) => when(m.createdAt)],
  ], async (cursor) => {
    const r = await asTarget.GET("/jobs/{id}/messages", { params: { path: { id }, query: { limit: 50, cursor } } });
    const d = data(r);
    return { rows: d.messages, next: d.nextCursor };
  }, "No messages on this job.");
}

export function myAudit(): Node {
  return pagedList<Schemas["StaffAuditRecord"]>("Your actions, newest first", [
    ["Time", (r) => when(r.createdAt)],
    ["What", (r) => r.kind === "action" ? h("span", null, r.action ?? "", r.targetId ? [" on ", h("code", null, `${r.targetRole ?? ""} ${r.targetId}`)] : null)
      : h("span", null, "Impersonated request ", h("code", null, `${r.method ?? ""} ${r.path ?? ""}`))],
    ["Elevation", (r) => r.elevationId ? h("code", null, r.elevationId) : "—"],
    ["Status", (r) => r.status === null ? "—" : String(r.status)],
  ], async (cursor) => {
    const r = await api.GET("/staff/audit/me", { params: { query: { limit: 25, cursor } } });
    return { rows: data(r), next: nextCursor(r.response) };
  }, "Nothing recorded yet.");
}

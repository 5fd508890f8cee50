// Customer support: find a customer (email, name or id), their jobs, payments and refunds, a
// refund from a job's page, and the reports and disputes queues with their actions.
import { api, data, type Schemas } from "./api";
import { barChart } from "./charts";
import { badge, dl, errorBox, field, fill, h, input, loading, money, month, nextCursor, onSubmit, pagedList, select, table, when } from "./dom";
import { flash } from "./main";
import type { Ctx } from "./routes";
import { statusBadge } from "./screens_common";

const ID = /^c[0-9a-z]{24}$/;

/** A search form whose query is in the address (?q=), so a search is a link too. */
export function searchForm(ctx: Ctx, label: string, hint: string): HTMLFormElement {
  const q = input("q", { type: "search", value: ctx.query.get("q") ?? "", maxlength: 100 });
  const form = h("form", { class: "search", role: "search", "aria-label": "Search" }, field(label, q, hint), h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = q.value.trim();
    ctx.go(`${location.pathname}${v ? `?q=${encodeURIComponent(v)}` : ""}`);
  });
  return form;
}

export function search(ctx: Ctx): Node {
  const q = (ctx.query.get("q") ?? "").trim();
  const out = h("div", null, searchForm(ctx, "Email, name or id", "Part of an email or a name matches; a whole id opens the customer."));
  if (ID.test(q)) {
    const box = h("div");
    out.append(box);
    void loading(box, api.GET("/staff/customers/{id}", { params: { path: { id: q } } }).then(() => ctx.go(`/portal/customers/${q}`, true)), () => null);
    return out;
  }
  out.append(pagedList<Schemas["CustomerSearchResult"]>(q ? `Customers matching “${q}”` : "Customers, newest first", [
    ["Name", (c) => h("a", { href: `/portal/customers/${c.id}` }, c.name)],
    ["Email", (c) => c.email],
    ["ZIP", (c) => c.zip],
    ["Since", (c) => when(c.createdAt)],
  ], async (cursor) => {
    const r = await api.GET("/staff/customers", { params: { query: { q: q || undefined, limit: 25, cursor } } });
    return { rows: data(r), next: nextCursor(r.response) };
  }, "No customer matches."));
  return out;
}

function paymentsChart(payments: Schemas["Payment"][]): Element | null {
  const months = new Map<string, { paid: number; refunded: number }>();
  for (const p of payments) {
    const m = p.createdAt?.slice(0, 7) ?? "";
    const e = months.get(m) ?? { paid: 0, refunded: 0 };
    e.paid += p.amount;
    e.refunded += p.refundedAmount ?? 0;
    months.set(m, e);
  }
  const keys = [...months.keys()].sort();
  if (!keys.length) return null;
  return barChart("Payments and refunds by month", keys.map(month), [
    { name: "Charged", values: keys.map((k) => months.get(k)?.paid ?? 0) },
    { name: "Refunded", values: keys.map((k) => months.get(k)?.refunded ?? 0) },
  ], money);
}

export function detail(ctx: Ctx): Node {
  const id = ctx.params.id ?? "";
  const out = h("div");
  void loading(out, api.GET("/staff/customers/{id}", { params: { path: { id } } }), (r) => {
    const d = data(r);
    ctx.heading.textContent = `Customer: ${d.user.name}`;
    document.title = `${d.user.name} · Staff portal`;
    const refunds = d.payments.flatMap((p) => (p.refunds ?? []).map((x) => ({ ...x, jobId: p.jobId, kind: p.kind })));
    return [
      h("section", { class: "card" }, h("h2", null, "Profile"),
        dl([["Name", d.user.name], ["Email", d.user.email], ["Id", h("code", null, d.user.id)], ["Address", `${d.user.address ?? ""} ${d.user.zip ?? ""}`],
          ["Premium", d.user.isPremium ? "Yes" : "No"], ["Since", when(d.user.createdAt)]]),
        h("p", null, h("a", { class: "button", href: `/portal/elevations/new?targetId=${d.user.id}&targetRole=user` }, "Request an elevation to act as this customer"))),
      h("section", { class: "card" }, h("h2", null, "Jobs"),
        table("The customer's jobs", [
          ["Job", (j) => h("a", { href: `/portal/customers/${id}/jobs/${j.id}` }, `${j.service} job ${j.id}`)],
          ["Status", (j) => statusBadge(j.status)],
          ["Payment", (j) => (j.payment ? h("span", null, money(j.payment.amount), " ", statusBadge(j.payment.status)) : "—")],
          ["Refunded", (j) => money(j.payment?.refundedAmount ?? 0)],
          ["Created", (j) => when(j.createdAt)],
        ], d.jobs, "No jobs.")),
      h("section", { class: "card" }, h("h2", null, "Payments"),
        paymentsChart(d.payments),
        table("The customer's payments", [
          ["Kind", (p) => p.kind],
          ["Amount", (p) => money(p.amount)],
          ["Refunded", (p) => money(p.refundedAmount)],
          ["Status", (p) => statusBadge(p.status)],
          ["Dispute", (p) => (p.dispute ? h("span", null, statusBadge(p.dispute.status), " ", money(p.dispute.amount)) : "—")],
          ["Job", (p) => (p.jobId ? h("a", { href: `/portal/customers/${id}/jobs/${p.jobId}` }, `Job ${p.jobId}`) : "—")],
          ["Created", (p) => when(p.createdAt)],
        ], d.payments, "No payments.")),
      h("section", { class: "card" }, h("h2", null, "Refunds"),
        table("The customer's refunds", [
          ["Amount", (x) => money(x.amount)],
          ["Of", (x) => x.kind],
          ["Reason", (x) => x.reason],
          ["Borne by", (x) => (x.providerShare === "prorata" ? "Provider and platform" : "Platform")],
          ["Status", (x) => statusBadge(x.status)],
          ["When", (x) => when(x.createdAt)],
        ], refunds, "No refunds.")),
      h("section", { class: "card" }, h("h2", null, "Elevations on this customer"),
        table("Elevations", [["Staff", (e) => e.staff.name], ["Status", (e) => statusBadge(e.status)], ["Reason", (e) => e.reason], ["Requested", (e) => when(e.createdAt)]], d.elevations, "None.")),
    ];
  });
  return out;
}

export function job(ctx: Ctx): Node {
  const id = ctx.params.id ?? "", jobId = ctx.params.jobId ?? "";
  const out = h("div");
  void loading(out, api.GET("/staff/customers/{id}", { params: { path: { id } } }), (r) => {
    const d = data(r);
    const j = d.jobs.find((x) => x.id === jobId);
    if (!j) return errorBox(new Error("this customer has no such job"));
    ctx.heading.textContent = `Job ${j.id} (${j.service})`;
    const payments = d.payments.filter((p) => p.jobId === jobId);
    const form = h("form", { class: "card narrow", novalidate: true, "aria-labelledby": "refund-h" },
      h("h2", { id: "refund-h" }, "Refund"),
      field("Amount (USD)", input("amount", { type: "number", step: "0.01", min: "0.01", inputmode: "decimal" }), "Leave empty to refund all that is left."),
      field("Target", select("target", [["job", "The job's payment"], ["tip", "The tip"], ["all", "Both"]], "job")),
      field("Who bears it", select("providerShare", [["prorata", "Provider's share given back (pro rata)"], ["none", "The platform alone (goodwill)"]], "prorata")),
      field("Reason", h("textarea", { name: "reason", rows: 2, required: true, maxlength: 500 })),
      h("button", { type: "submit" }, "Refund"));
    onSubmit(form, async (fd) => {
      const amount = String(fd.get("amount") ?? "").trim();
      const target = String(fd.get("target")) as "job" | "tip" | "all";
      const share = String(fd.get("providerShare")) as "prorata" | "none";
      const res = data(await api.POST("/staff/payments/{jobId}/refund", { params: { path: { jobId } }, body: { reason: String(fd.get("reason") ?? ""), target, providerShare: share, ...(amount ? { amount: Number(amount) } : {}) } }));
      flash(`Refunded ${money(res.refunds.reduce((a, x) => a + x.amount, 0))} to ${d.user.name}.`);
      ctx.go(`/portal/customers/${id}`);
    });
    return [
      h("section", { class: "card" }, h("h2", null, "The job"),
        dl([["Service", j.service], ["Status", statusBadge(j.status)], ["Address", `${j.address} ${j.zip}`], ["Description", j.description ?? "—"], ["Created", when(j.createdAt)], ["Tip", money(j.tipAmount)]]),
        h("p", null, "Messages are read as the customer, in an impersonation session: ", h("a", { href: `/portal/session/jobs/${j.id}` }, "Messages of this job"), ".")),
      h("section", { class: "card" }, h("h2", null, "Quotes"),
        table("Quotes", [["Amount", (q) => money(q.amount)], ["Status", (q) => statusBadge(String(q.status))], ["Sent", (q) => when(q.createdAt)]], j.quotes, "No quotes.")),
      h("section", { class: "card" }, h("h2", null, "Payments"),
        table("Payments of the job", [["Kind", (p) => p.kind], ["Amount", (p) => money(p.amount)], ["Refunded", (p) => money(p.refundedAmount)], ["Status", (p) => statusBadge(p.status)]], payments, "No payments.")),
      form,
    ];
  });
  return out;
}

function statusFilter(ctx: Ctx, label: string, options: [string, string][], fallback = ""): HTMLFormElement {
  const s = select("status", options, ctx.query.get("status") ?? fallback);
  const form = h("form", { class: "filters", "aria-label": `Filter ${label}` }, field("Status", s), h("button", { type: "submit", class: "secondary" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    ctx.go(`${location.pathname}${s.value ? `?status=${encodeURIComponent(s.value)}` : ""}`);
  });
  return form;
}
export { statusFilter };

export function reports(ctx: Ctx): Node {
  const status = ctx.query.get("status") === "resolved" ? "resolved" : ctx.query.get("status") === "open" ? "open" : undefined;
  return h("div", null, statusFilter(ctx, "reports", [["", "All"], ["open", "Open"], ["resolved", "Resolved"]]),
    pagedList<Schemas["JobReportCase"]>("Reports of completed jobs, newest first", [
      ["Job", (x) => h("span", null, `${x.job.service} `, h("code", null, x.jobId))],
      ["Report", (x) => x.description],
      ["Held", (x) => money(x.heldTransfers.reduce((a, t) => a + t.amount, 0))],
      ["Status", (x) => statusBadge(x.status)],
      ["Made", (x) => when(x.createdAt)],
      ["Customer", (x) => (x.customerId ? h("a", { href: `/portal/customers/${x.customerId}` }, `Customer of report ${x.id}`) : "Erased")],
      ["Resolve", (x) => (x.status === "open" ? resolveForm(x, ctx) : x.resolution ? `${x.resolution.action}: ${x.resolution.note}` : "—")],
    ], async (cursor) => {
      const r = await api.GET("/staff/reports", { params: { query: { status, limit: 25, cursor } } });
      return { rows: data(r), next: nextCursor(r.response) };
    }, "No reports."));
}

function resolveForm(x: Schemas["JobReportCase"], ctx: Ctx): HTMLElement {
  const form = h("form", { class: "inline", "aria-label": `Resolve report ${x.id}`, novalidate: true },
    field("Action", select("action", [["release", "Release the money"], ["refund", "Refund the customer"]], "release")),
    field("Amount (refund)", input("amount", { type: "number", step: "0.01", min: "0.01" })),
    field("Note", input("note", { required: true, maxlength: 2000 })),
    h("button", { type: "submit" }, "Resolve"));
  onSubmit(form, async (fd) => {
    const amount = String(fd.get("amount") ?? "").trim();
    await api.POST("/staff/reports/{id}/resolve", { params: { path: { id: x.id } }, body: { action: fd.get("action") === "refund" ? "refund" : "release", note: String(fd.get("note") ?? ""), ...(amount ? { amount: Number(amount) } : {}) } });
    flash(`Report ${x.id} resolved.`);
    ctx.refresh();
  });
  return form;
}

export function disputes(ctx: Ctx): Node {
  const status = ctx.query.get("status") === "closed" ? "closed" : ctx.query.get("status") === "open" ? "open" : undefined;
  return h("div", null, statusFilter(ctx, "disputes", [["", "All"], ["open", "Open"], ["closed", "Closed"]]),
    pagedList<Schemas["Dispute"]>("Disputes (chargebacks)", [
      ["Customer", (x) => h("a", { href: `/portal/customers/${x.customer.id}` }, x.customer.name)],
      ["Job", (x) => `${x.job.service} (${x.paymentKind})`],
      ["Amount", (x) => money(x.amount)],
      ["Reason", (x) => x.reason.replace(/_/g, " ")],
      ["Status", (x) => statusBadge(x.status)],
      ["Evidence due", (x) => when(x.evidenceDueBy)],
      ["Evidence", (x) => (x.evidenceSubmittedAt ? h("span", null, "Sent ", when(x.evidenceSubmittedAt)) : /needs_response/.test(x.status) ? evidenceForm(x, ctx) : "—")],
    ], async (cursor) => {
      const r = await api.GET("/staff/disputes", { params: { query: { status, limit: 25, cursor } } });
      return { rows: data(r), next: nextCursor(r.response) };
    }, "No disputes."));
}

function evidenceForm(x: Schemas["Dispute"], ctx: Ctx): HTMLElement {
  const files = x.files.map((f) => h("div", { class: "field check" }, h("input", { type: "checkbox", name: "fileIds", value: f.id, id: `ev-${x.id}-${f.id}` }),
    h("label", { for: `ev-${x.id}-${f.id}` }, h("img", { src: f.url, alt: `${f.source} photo ${f.id}`, class: "thumb" }))));
  const form = h("form", { class: "inline", "aria-label": `Answer dispute ${x.id}`, novalidate: true },
    field("Evidence text", h("textarea", { name: "text", rows: 3, required: true, maxlength: 20000 })), files,
    h("button", { type: "submit" }, "Send evidence (final)"));
  onSubmit(form, async (fd) => {
    await api.POST("/staff/disputes/{id}/evidence", { params: { path: { id: x.id } }, body: { text: String(fd.get("text") ?? ""), fileIds: fd.getAll("fileIds").map(String) } });
    flash(`Evidence sent for dispute ${x.id}.`);
    ctx.refresh();
  });
  return form;
}

void badge;
void fill;

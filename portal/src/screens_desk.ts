// Technical support's ticket desk (read, answer with notes, move, close) and internal audit's
// read-only view of every staff member's elevations with the requests recorded in each.
import { api, data, type Schemas } from "./api";
import { dl, errorBox, field, h, loading, nextCursor, onSubmit, pagedList, select, table, when } from "./dom";
import { flash } from "./main";
import type { Ctx } from "./routes";
import { statusBadge } from "./screens_common";
import { statusFilter } from "./screens_customers";

type Ticket = Schemas["SupportTicket"];
type TicketStatus = Ticket["status"];
const STATUSES: TicketStatus[] = ["OPEN", "IN_PROGRESS", "RESOLVED", "CLOSED"];

function ticketStatus(v: string | null): TicketStatus | undefined {
  return STATUSES.find((s) => s === v);
}

export function tickets(ctx: Ctx): Node {
  const status = ticketStatus(ctx.query.get("status"));
  return h("div", null, statusFilter(ctx, "tickets", [["", "Open and in progress"], ["OPEN", "Open"], ["IN_PROGRESS", "In progress"], ["RESOLVED", "Resolved"], ["CLOSED", "Closed"]]),
    pagedList<Ticket>("Support tickets, oldest first", [
      ["Subject", (t) => h("a", { href: `/portal/tickets/${t.id}` }, t.subject)],
      ["From", (t) => (t.account ? `${t.account.name} (${t.accountRole === "user" ? "customer" : "provider"})` : t.accountRole)],
      ["Category", (t) => t.category],
      ["Status", (t) => statusBadge(t.status)],
      ["Assigned", (t) => t.assignedTo?.name ?? "—"],
      ["Opened", (t) => when(t.createdAt)],
    ], async (cursor) => {
      const r = await api.GET("/staff/tickets", { params: { query: { status, limit: 25, cursor } } });
      return { rows: data(r), next: nextCursor(r.response) };
    }, "No tickets."));
}

/** The ticket, from the lists (there is no single-ticket read): the default list, then each
 * closed status, page by page. */
async function findTicket(id: string): Promise<Ticket> {
  for (const status of [undefined, "RESOLVED", "CLOSED"] as const) {
    let cursor: string | undefined;
    do {
      const r = await api.GET("/staff/tickets", { params: { query: { status, limit: 100, cursor } } });
      const t = data(r).find((x) => x.id === id);
      if (t) return t;
      cursor = nextCursor(r.response);
    } while (cursor);
  }
  throw new Error("no ticket has this id");
}

export function ticket(ctx: Ctx): Node {
  const id = ctx.params.id ?? "";
  const out = h("div");
  void loading(out, findTicket(id), (t) => {
    ctx.heading.textContent = `Ticket: ${t.subject}`;
    const notes = h("textarea", { name: "notes", rows: 4, maxlength: 5000 });
    notes.value = t.notes ?? "";
    const form = h("form", { class: "card narrow", novalidate: true, "aria-labelledby": "answer-h" },
      h("h2", { id: "answer-h" }, "Answer"),
      field("Notes (internal)", notes),
      field("Status", select("status", STATUSES.map((s) => [s, s.replace("_", " ").toLowerCase()]), t.status)),
      h("button", { type: "submit" }, "Save"));
    onSubmit(form, async (fd) => {
      await api.PATCH("/staff/tickets/{id}", { params: { path: { id } }, body: { notes: String(fd.get("notes") ?? ""), status: ticketStatus(String(fd.get("status"))) ?? null } });
      flash("Ticket saved.");
      ctx.refresh();
    });
    const close = h("button", { type: "button", class: "secondary", onclick: async () => {
      try {
        await api.PATCH("/staff/tickets/{id}", { params: { path: { id } }, body: { status: "CLOSED" } });
        flash("Ticket closed.");
        ctx.refresh();
      } catch (e) { close.after(errorBox(e)); }
    } }, "Close the ticket");
    return [
      h("section", { class: "card" }, h("h2", null, "Request"),
        dl([["From", t.account ? `${t.account.name} <${t.account.email}>` : t.accountId], ["Account", `${t.accountRole === "user" ? "Customer" : "Provider"} ${t.accountId}`],
          ["Category", t.category], ["Status", statusBadge(t.status)], ["Assigned", t.assignedTo?.name ?? "—"], ["Opened", when(t.createdAt)], ["Resolved", when(t.resolvedAt)]]),
        h("blockquote", { class: "body" }, t.body)),
      form, t.status !== "CLOSED" ? h("p", null, close) : null,
    ];
  });
  return out;
}

export function auditSessions(): Node {
  return pagedList<Schemas["StaffAudit"]>("Staff members and their elevations, newest first", [
    ["Staff member", (s) => h("span", null, s.name, h("br"), h("small", null, `${s.email} · ${s.role.replace(/_/g, " ")}`))],
    ["Elevations", (s) => s.sessions.length ? h("ul", { class: "plain" }, s.sessions.map((e) => h("li", null,
      h("p", null, statusBadge(e.status), ` ${e.targetRole === "user" ? "customer" : "provider"} `, h("code", null, e.targetId), `: ${e.reason} · `, when(e.createdAt)),
      e.events.length ? table(`Requests in elevation ${e.id}`, [["Time", (ev) => when(ev.createdAt)], ["Request", (ev) => h("code", null, `${ev.method} ${ev.path}`)], ["Status", (ev) => (ev.status == null ? "—" : String(ev.status))]], e.events) : h("p", null, "No requests recorded.")))) : "None"],
  ], async (cursor) => {
    const r = await api.GET("/staff/audit/sessions", { params: { query: { limit: 10, cursor } } });
    return { rows: data(r), next: nextCursor(r.response) };
  }, "No staff members.");
}

// The administrator's GODMODE area (development only): elevation approvals (as the emailed
// links do), staff members (create, act as one: the same screens as that member), accounts
// (impersonate, delete), banners and data generation.
import { api, currentSession, data, endSession, startImpersonation, startSession, tokenExpiry, type Schemas } from "./api";
import { errorBox, field, h, input, loading, nextCursor, onSubmit, pagedList, select, shownInPages, when } from "./dom";
import { flash } from "./main";
import type { Ctx } from "./routes";
import { statusBadge } from "./screens_common";
import { statusFilter } from "./screens_customers";

type Elevation = Schemas["ElevationRequest"];
type ElevationStatus = Elevation["status"];
const ELEVATION_STATUSES: ElevationStatus[] = ["PENDING", "APPROVED", "ACTIVE", "REJECTED", "DEACTIVATED", "EXPIRED"];

export function elevations(ctx: Ctx): Node {
  const raw = ctx.query.get("status") ?? "PENDING";
  const status = ELEVATION_STATUSES.find((s) => s === raw);
  return h("div", null,
    statusFilter(ctx, "elevation requests", [["all", "All"], ...ELEVATION_STATUSES.map((s): [string, string] => [s, s.toLowerCase()])], "PENDING"),
    pagedList<Elevation>("Elevation requests, newest first", [
      ["Staff member", (e) => `${e.staff.name} (${e.staff.role.replace(/_/g, " ")})`],
      ["Account", (e) => h("span", null, `${e.targetRole === "user" ? "Customer" : "Provider"} `, h("code", null, e.targetId))],
      ["Reason", (e) => e.reason],
      ["Status", (e) => statusBadge(e.status)],
      ["Requested", (e) => when(e.createdAt)],
      ["Decision", (e) => {
        const cell = h("div", { class: "actions" });
        const act = (what: "approve" | "deny") => async () => {
          try {
            if (what === "approve") await api.POST("/admin/elevations/{id}/approve", { params: { path: { id: e.id } } });
            else await api.POST("/admin/elevations/{id}/deny", { params: { path: { id: e.id } } });
            flash(`Elevation ${e.id} ${what === "approve" ? "approved" : "denied"}.`);
            ctx.refresh();
          } catch (err) { cell.append(errorBox(err)); }
        };
        if (e.status === "PENDING") cell.append(h("button", { type: "button", "aria-label": `Approve the request of ${e.staff.name}: ${e.reason}`, onclick: act("approve") }, "Approve"));
        if (e.status === "PENDING" || e.status === "APPROVED" || e.status === "ACTIVE")
          cell.append(h("button", { type: "button", class: "danger", "aria-label": `${e.status === "PENDING" ? "Deny" : "End"} the request of ${e.staff.name}: ${e.reason}`, onclick: act("deny") }, e.status === "PENDING" ? "Deny" : "End"));
        return cell;
      }],
    ], async (cursor) => {
      const r = await api.GET("/admin/elevations", { params: { query: { status, limit: 25, cursor } } });
      return { rows: data(r), next: nextCursor(r.response) };
    }, "No elevation requests."));
}

export function staff(ctx: Ctx): Node {
  const form = h("form", { class: "card narrow", novalidate: true, "aria-labelledby": "create-h" },
    h("h2", { id: "create-h" }, "Create a staff member"),
    field("Name", input("name", { required: true, maxlength: 100 })),
    field("Email", input("email", { type: "email", required: true })),
    field("Password", input("password", { type: "password", required: true, autocomplete: "new-password" }), "8 to 72 characters."),
    field("Role", select("role", [["customer_support", "Customer support"], ["professional_support", "Professional support"], ["technical_support", "Technical support"], ["internal_audit", "Internal audit"]], "customer_support")),
    h("button", { type: "submit" }, "Create"));
  onSubmit(form, async (fd) => {
    const role = String(fd.get("role")) as Schemas["StaffRole"];
    const s = data(await api.POST("/staff/create", { body: { name: String(fd.get("name") ?? ""), email: String(fd.get("email") ?? ""), password: String(fd.get("password") ?? ""), role } }));
    flash(`Staff member ${s.name} created.`);
    ctx.refresh();
  });
  const actAs = (m: Schemas["Staff"]) => async (ev: Event) => {
    const admin = currentSession();
    try {
      const r = data(await api.POST("/staff/impersonate-staff", { body: { staffId: m.id } }));
      if (!admin) return;
      endSession(null);
      startSession({ token: r.token, role: r.staff.role, id: r.staff.id, name: r.staff.name, email: r.staff.email, expiresAt: tokenExpiry(r.token, 15 * 60e3), admin });
      ctx.go("/portal/");
    } catch (e) { (ev.target as HTMLElement).after(errorBox(e)); }
  };
  return h("div", null, form,
    pagedList<Schemas["Staff"]>("Staff members, newest first", [
      ["Name", (m) => m.name], ["Email", (m) => m.email], ["Role", (m) => m.role.replace(/_/g, " ")], ["Since", (m) => when(m.createdAt)],
      ["GODMODE", (m) => h("button", { type: "button", class: "secondary", "aria-label": `Act as ${m.name}`, onclick: actAs(m) }, "Act as")],
    ], async (cursor) => {
      const r = await api.GET("/staff/list", { params: { query: { limit: 25, cursor } } });
      return { rows: data(r), next: nextCursor(r.response) };
    }, "No staff members yet."));
}

export function accounts(ctx: Ctx): Node {
  const out = h("div");
  const actions = (id: string, name: string, role: "user" | "provider") => {
    const cell = h("div", { class: "actions" });
    cell.append(
      h("button", { type: "button", "aria-label": `Impersonate ${name}`, onclick: async () => {
        try {
          const r = data(await api.POST("/admin/impersonate", { body: { targetId: id, targetRole: role } }));
          startImpersonation({ token: r.token, identity: r.identity, elevationId: null, expiresAt: tokenExpiry(r.token, 2 * 3600e3), actions: [] });
          ctx.go("/portal/session");
        } catch (e) { cell.append(errorBox(e)); }
      } }, "Impersonate"),
      h("a", { href: `/portal/admin/banner?userId=${id}&role=${role}`, "aria-label": `Send a banner to ${name}` }, "Banner"),
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${name}`, onclick: async () => {
        if (!window.confirm(`Delete ${name} and everything that hangs on the account?`)) return;
        try {
          await api.DELETE("/admin/accounts/{id}", { params: { path: { id }, query: { role } } });
          flash(`${name} deleted.`);
          ctx.refresh();
        } catch (e) { cell.append(errorBox(e)); }
      } }, "Delete"));
    return cell;
  };
  void loading(out, api.GET("/admin/users", {}), (r) => {
    const d = data(r);
    return [
      h("section", { class: "card" }, h("h2", null, "Customers"),
        shownInPages("Customers (newest 1000)", [["Name", (u) => u.name], ["Email", (u) => u.email], ["Since", (u) => when(u.createdAt)], ["Actions", (u) => actions(u.id, u.name, "user")]], d.users, "No customers.")),
      h("section", { class: "card" }, h("h2", null, "Providers"),
        shownInPages("Providers (newest 1000)", [["Name", (p) => p.name], ["Company", (p) => p.companyName ?? "—"], ["Email", (p) => p.email], ["Actions", (p) => actions(p.id, p.name, "provider")]], d.providers, "No providers.")),
    ];
  });
  return out;
}

export function bannerForm(ctx: Ctx): Node {
  const form = h("form", { class: "card narrow", novalidate: true },
    field("Account id", input("userId", { value: ctx.query.get("userId") ?? "", required: true })),
    field("Account type", select("role", [["user", "Customer"], ["provider", "Provider"]], ctx.query.get("role") ?? "user")),
    field("Title", input("title", { required: true, maxlength: 200 })),
    field("Message", h("textarea", { name: "body", rows: 3, required: true, maxlength: 2000 })),
    h("button", { type: "submit" }, "Queue the banner"));
  onSubmit(form, async (fd) => {
    await api.POST("/admin/notify", { body: { userId: String(fd.get("userId") ?? ""), role: fd.get("role") === "provider" ? "provider" : "user", title: String(fd.get("title") ?? ""), body: String(fd.get("body") ?? "") } });
    flash("Banner queued: the account sees it on its next poll.");
    ctx.refresh();
  });
  return form;
}

export function generate(ctx: Ctx): Node {
  const result = h("div", { role: "status" });
  const form = h("form", { class: "card narrow", novalidate: true },
    field("Customers", input("customers", { type: "number", min: 0, max: 1000, value: 5 })),
    field("Professionals", input("professionals", { type: "number", min: 0, max: 1000, value: 3 })),
    field("Requests per customer", input("requestsPerCustomer", { type: "number", min: 0, max: 20, value: 1 })),
    h("button", { type: "submit" }, "Generate"));
  onSubmit(form, async (fd) => {
    const n = (k: string) => Number(fd.get(k) ?? 0);
    const r = data(await api.POST("/admin/generate", { body: { customers: n("customers"), professionals: n("professionals"), requestsPerCustomer: n("requestsPerCustomer") } }));
    result.replaceChildren(h("p", null, `Created ${r.created.customers} customers, ${r.created.professionals} professionals and ${r.created.jobs} jobs. ${r.note}`));
  });
  void ctx;
  return h("div", null, form, result);
}

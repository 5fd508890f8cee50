// Professional support: find a provider, its profile, its documents with the recognition
// results beside the images (licence, insurance) and their flags, its jobs and its ledger by
// month (a chart and a table). Transfers and the payout account are the provider's own data:
// they are read in an impersonation session (screens_common.ts).
import { api, data, type Schemas } from "./api";
import { barChart } from "./charts";
import { badge, dl, h, loading, money, month, nextCursor, pagedList, table, when } from "./dom";
import type { Ctx } from "./routes";
import { statusBadge } from "./screens_common";
import { searchForm } from "./screens_customers";

const ID = /^c[0-9a-z]{24}$/;

export function search(ctx: Ctx): Node {
  const q = (ctx.query.get("q") ?? "").trim();
  const out = h("div", null, searchForm(ctx, "Name, email, company or id", "Part of a name, email or company matches; a whole id opens the provider."));
  if (ID.test(q)) {
    const box = h("div");
    out.append(box);
    void loading(box, api.GET("/staff/providers/{id}", { params: { path: { id: q } } }).then(() => ctx.go(`/portal/providers/${q}`, true)), () => null);
    return out;
  }
  out.append(pagedList<Schemas["ProviderSearchResult"]>(q ? `Providers matching “${q}”` : "Providers, newest first", [
    ["Name", (p) => h("a", { href: `/portal/providers/${p.id}` }, p.name)],
    ["Company", (p) => p.companyName ?? "—"],
    ["Email", (p) => p.email],
    ["Services", (p) => p.services.join(", ")],
    ["Preferred Pro", (p) => (p.isPremium ? "Yes" : "No")],
  ], async (cursor) => {
    const r = await api.GET("/staff/providers", { params: { query: { q: q || undefined, limit: 25, cursor } } });
    return { rows: data(r), next: nextCursor(r.response) };
  }, "No provider matches."));
  return out;
}

function flags(list: string[] | undefined): Node {
  if (!list || !list.length) return document.createTextNode("None");
  return h("span", null, list.map((f) => badge(f, "bad")));
}

function doc(title: string, images: [string | null | undefined, string][], facts: [string, Node | string][]): HTMLElement {
  const shown = images.filter(([url]) => !!url);
  return h("section", { class: "card doc" }, h("h3", null, title),
    h("div", { class: "doc-row" },
      h("div", { class: "doc-images" }, shown.length ? shown.map(([url, alt]) => h("a", { href: url ?? "", target: "_blank", rel: "noopener" }, h("img", { src: url ?? "", alt, class: "doc-img" }))) : h("p", null, "No document uploaded.")),
      dl(facts)));
}

export function detail(ctx: Ctx): Node {
  const id = ctx.params.id ?? "";
  const out = h("div");
  void loading(out, api.GET("/staff/providers/{id}", { params: { path: { id } } }), (r) => {
    const d = data(r);
    const p = d.provider;
    ctx.heading.textContent = `Provider: ${p.name}`;
    document.title = `${p.name} · Staff portal`;
    const ledger = [...d.ledger].sort((a, b) => a.month.localeCompare(b.month));
    return [
      h("section", { class: "card" }, h("h2", null, "Profile"),
        dl([["Name", p.name], ["Company", p.companyName ?? "—"], ["Email", p.email], ["Phone", p.phone ?? "—"], ["Id", h("code", null, p.id)],
          ["Services", p.services.join(", ")], ["ZIP codes", p.serviceZips.join(", ")], ["Preferred Pro", p.isPremium ? h("span", null, "Since ", when(p.premiumSince)) : "No"],
          ["Balance", money(d.balance)], ["Anticipated", `${d.anticipatedJobs} jobs, ${money(d.anticipatedTotal)}`], ["Since", when(p.createdAt)]]),
        h("p", null, h("a", { class: "button", href: `/portal/elevations/new?targetId=${p.id}&targetRole=provider` }, "Request an elevation to act as this provider"))),
      h("section", { class: "card" }, h("h2", null, "Documents"),
        doc("Driver's licence", [[p.idDocFront, "Driver's licence, front"], [p.idDocBack, "Driver's licence, back"]], [
          ["Check", p.idCheckStatus ? statusBadge(p.idCheckStatus) : "Not checked"], ["Name read", p.idCheckName ?? "—"], ["Date of birth", p.idCheckDOB ?? "—"],
          ["Expires", p.idCheckExpiry ?? "—"], ["State", p.idCheckState ?? "—"], ["Flags", flags(p.idCheckFlags)], ["Checked", when(p.idCheckAt)]]),
        doc("Insurance", [[p.insDocUrl, "Insurance certificate"]], [
          ["Check", p.insCheckStatus ? statusBadge(p.insCheckStatus) : "Not checked"], ["Carrier", p.insCheckCarrier ?? "—"], ["Policy", p.insCheckPolicy ?? "—"],
          ["Effective", p.insCheckEffective ?? "—"], ["Expires", p.insCheckExpiry ?? "—"], ["Coverage", p.insCheckCoverage ? money(Number(p.insCheckCoverage)) : "—"],
          ["Flags", flags(p.insCheckFlags)], ["Checked", when(p.insCheckAt)]])),
      h("section", { class: "card" }, h("h2", null, "Ledger by month"),
        ledger.length ? barChart("Earnings by month", ledger.map((l) => month(l.month)), [
          { name: "Gross", values: ledger.map((l) => l.grossEarnings) },
          { name: "Net", values: ledger.map((l) => l.netEarnings) },
          { name: "Paid out", values: ledger.map((l) => l.paidOut) },
        ], money) : null,
        table("Ledger", [
          ["Month", (l) => month(l.month)], ["Jobs", (l) => String(l.jobs)], ["Gross", (l) => money(l.grossEarnings)], ["Preferred Pro fee", (l) => money(l.premiumFeeDeducted)],
          ["Net", (l) => money(l.netEarnings)], ["Paid out", (l) => money(l.paidOut)], ["On hold", (l) => money(l.inHold)], ["Pending capture", (l) => money(l.pendingCapture)],
        ], ledger, "No earnings yet.")),
      h("section", { class: "card" }, h("h2", null, "Jobs"),
        table("The provider's jobs", [
          ["Job", (j) => h("span", null, `${j.service} `, h("code", null, j.id))], ["Status", (j) => statusBadge(j.status)],
          ["Payment", (j) => (j.payment ? h("span", null, money(j.payment.amount), " ", statusBadge(j.payment.status)) : "—")],
          ["Review", (j) => (j.review ? `${j.review.rating} / 5` : "—")], ["Created", (j) => when(j.createdAt)],
        ], d.jobs, "No jobs.")),
      h("section", { class: "card" }, h("h2", null, "Elevations on this provider"),
        table("Elevations", [["Staff", (e) => e.staff.name], ["Status", (e) => statusBadge(e.status)], ["Reason", (e) => e.reason], ["Requested", (e) => when(e.createdAt)]], d.elevations, "None.")),
    ];
  });
  return out;
}

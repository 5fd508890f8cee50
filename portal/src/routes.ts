// Every screen of the portal: its address, title, the roles that see it and whether it is in
// the navigation. The order is the navigation's order.
import type { Role } from "./api";
import * as common from "./screens_common";
import * as customers from "./screens_customers";
import * as providers from "./screens_providers";
import * as desk from "./screens_desk";
import * as admin from "./screens_admin";

export interface Ctx {
  params: Record<string, string>;
  query: URLSearchParams;
  heading: HTMLElement;
  go: (path: string, replace?: boolean) => void;
  refresh: () => void;
}

export interface Route {
  path: string;
  title: string;
  roles: Role[] | "all";
  nav?: string;
  needsImpersonation?: boolean;
  render: (ctx: Ctx) => Node;
}

const SUPPORT: Role[] = ["customer_support", "professional_support"];
const STAFF: Role[] = ["customer_support", "professional_support", "technical_support", "internal_audit"];

export const ROUTES: Route[] = [
  { path: "/portal", title: "Home", roles: "all", nav: "Home", render: common.home },
  { path: "/portal/customers", title: "Find a customer", roles: ["customer_support"], nav: "Customers", render: customers.search },
  { path: "/portal/customers/:id", title: "Customer", roles: ["customer_support"], render: customers.detail },
  { path: "/portal/customers/:id/jobs/:jobId", title: "Job", roles: ["customer_support"], render: customers.job },
  { path: "/portal/reports", title: "Reports", roles: ["customer_support"], nav: "Reports", render: customers.reports },
  { path: "/portal/disputes", title: "Disputes", roles: ["customer_support"], nav: "Disputes", render: customers.disputes },
  { path: "/portal/providers", title: "Find a provider", roles: ["professional_support"], nav: "Providers", render: providers.search },
  { path: "/portal/providers/:id", title: "Provider", roles: ["professional_support"], render: providers.detail },
  { path: "/portal/tickets", title: "Support tickets", roles: ["technical_support"], nav: "Tickets", render: desk.tickets },
  { path: "/portal/tickets/:id", title: "Support ticket", roles: ["technical_support"], render: desk.ticket },
  { path: "/portal/audit", title: "Staff sessions audit", roles: ["internal_audit"], nav: "Sessions audit", render: desk.auditSessions },
  { path: "/portal/elevations", title: "Elevations", roles: STAFF, nav: "Elevations", render: common.elevations },
  { path: "/portal/elevations/new", title: "Request an elevation", roles: SUPPORT, render: common.requestElevation },
  { path: "/portal/session", title: "Impersonation session", roles: [...SUPPORT, "admin"], nav: "Session", needsImpersonation: true, render: common.session },
  { path: "/portal/session/jobs/:id", title: "Messages of a job", roles: [...SUPPORT, "admin"], render: common.sessionJob },
  { path: "/portal/audit/me", title: "My audit trail", roles: STAFF, nav: "My audit trail", render: common.myAudit },
  { path: "/portal/admin/elevations", title: "Elevation approvals", roles: ["admin"], nav: "Approvals", render: admin.elevations },
  { path: "/portal/admin/staff", title: "Staff members", roles: ["admin"], nav: "Staff", render: admin.staff },
  { path: "/portal/admin/accounts", title: "Accounts", roles: ["admin"], nav: "Accounts", render: admin.accounts },
  { path: "/portal/admin/banner", title: "Send a banner", roles: ["admin"], nav: "Banners", render: admin.bannerForm },
  { path: "/portal/admin/generate", title: "Generate data", roles: ["admin"], nav: "Generate data", render: admin.generate },
];

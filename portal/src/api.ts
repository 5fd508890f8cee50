// The portal's sessions, in memory only (never in localStorage or a cookie): the staff member's
// or administrator's token, and while one runs an impersonation session's token. A session ends
// when its token does: a timer at its expiry, and any 401 answer, sign the viewer out (or end
// the impersonation session) with a message.
import { createMarketplaceClient, MarketplaceError, type components, type MarketplaceClient } from "@marketplace/client";

export type Schemas = components["schemas"];
export type StaffRole = Schemas["StaffRole"];
export type Role = StaffRole | "admin";

export interface Session {
  token: string;
  role: Role;
  id: string;
  name: string;
  email: string;
  expiresAt: number; // ms since the epoch
  /** an administrator acting as this staff member (GODMODE): the administrator's session */
  admin?: Session;
}

export interface Impersonation {
  token: string;
  identity: Schemas["Impersonation"]["identity"];
  elevationId: string | null; // null: an administrator's (GODMODE) impersonation
  expiresAt: number;
  /** what the portal did with the token, shown in the banner's page: every request is audited */
  actions: { method: string; path: string; status: number; at: string }[];
}

let session: Session | null = null;
let impersonation: Impersonation | null = null;
let sessionTimer = 0;
let impTimer = 0;
const listeners: ((why: string | null) => void)[] = [];

/** Called with a message when the session or impersonation changes on its own (expiry, 401). */
export function onSessionChange(fn: (why: string | null) => void): void {
  listeners.push(fn);
}
function changed(why: string | null): void {
  for (const fn of listeners) fn(why);
}

export function currentSession(): Session | null {
  return session;
}
export function currentImpersonation(): Impersonation | null {
  return impersonation;
}

/** The expiry of a JWT (its exp claim), in ms; fallback when unreadable. */
export function tokenExpiry(token: string, fallbackMs: number): number {
  try {
    const part = token.split(".")[1] ?? "";
    const claims = JSON.parse(atob(part.replace(/-/g, "+").replace(/_/g, "/"))) as { exp?: number };
    if (typeof claims.exp === "number") return claims.exp * 1000;
  } catch {
    /* not a JWT we can read: the fallback */
  }
  return Date.now() + fallbackMs;
}

function timerFor(expiresAt: number, fire: () => void): number {
  // setTimeout holds at most 2^31-1 ms; a 24-hour token is well below that
  return window.setTimeout(fire, Math.max(0, Math.min(expiresAt - Date.now(), 2 ** 31 - 1)));
}

export function startSession(s: Session): void {
  session = s;
  window.clearTimeout(sessionTimer);
  sessionTimer = timerFor(s.expiresAt, () => endSession("Your session has ended: its token expired. Please sign in again."));
}

/** Forgets every token held (nothing else keeps one). */
export function endSession(why: string | null): void {
  window.clearTimeout(sessionTimer);
  dropImpersonation();
  session = null;
  changed(why);
}

export function startImpersonation(imp: Impersonation): void {
  impersonation = imp;
  window.clearTimeout(impTimer);
  impTimer = timerFor(imp.expiresAt, () => {
    dropImpersonation();
    changed("The impersonation session ended: its 15 minutes are over.");
  });
  changed(null);
}

export function dropImpersonation(): void {
  window.clearTimeout(impTimer);
  impersonation = null;
}

function onUnauthorized(e: unknown, who: "staff" | "target"): void {
  if (!(e instanceof MarketplaceError) || e.status !== 401) return;
  if (who === "staff" && session) endSession("Your session has ended. Please sign in again.");
  if (who === "target" && impersonation) {
    dropImpersonation();
    changed("The impersonation session has ended: its token is no longer accepted.");
  }
}

function client(token: () => string | null | undefined, who: "staff" | "target"): MarketplaceClient {
  const c = createMarketplaceClient({ baseUrl: location.origin, token, retries: 1 });
  c.use({
    onError({ error }) {
      onUnauthorized(error, who);
      return undefined;
    },
    async onResponse({ request, response }) {
      if (who === "target" && impersonation) {
        impersonation.actions.unshift({
          method: request.method,
          path: new URL(request.url).pathname,
          status: response.status,
          at: new Date().toISOString(),
        });
      }
      if (response.status === 401) onUnauthorized(new MarketplaceError(response, undefined), who);
      return undefined;
    },
  });
  return c;
}

/** The API as the signed-in staff member (or administrator). */
export const api = client(() => session?.token, "staff");
/** The API as the impersonated account (every request audited for a staff session). */
export const asTarget = client(() => impersonation?.token, "target");

/** Unwraps a call's data (the client throws on every error answer, so it is there). */
export function data<T>(result: { data?: T; response: Response }): T {
  if (result.data === undefined) throw new Error(`empty answer (${result.response.status})`);
  return result.data;
}

export function isSupport(role: Role | undefined): boolean {
  return role === "customer_support" || role === "professional_support";
}

export const ROLE_NAMES: Record<Role, string> = {
  customer_support: "Customer support",
  professional_support: "Professional support",
  technical_support: "Technical support",
  internal_audit: "Internal audit",
  admin: "Administrator (GODMODE)",
};

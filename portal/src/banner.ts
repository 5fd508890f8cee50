// The impersonation banner: on every page while a session runs, with its target, the time left
// and an End button; and the GODMODE banner while an administrator acts as a staff member.
import { api, currentImpersonation, currentSession, dropImpersonation, endSession, startSession } from "./api";
import { h } from "./dom";
import { flash, go, render } from "./main";

function left(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  const m = Math.floor(s / 60);
  return `${m}:${String(s % 60).padStart(2, "0")}`;
}

export async function endImpersonation(): Promise<void> {
  const imp = currentImpersonation();
  if (!imp) return;
  if (imp.elevationId) {
    try {
      await api.PATCH("/staff/elevation/{id}/deactivate", { params: { path: { id: imp.elevationId } } });
    } catch {
      /* already over: the token is forgotten either way */
    }
  }
  dropImpersonation();
  flash(`The impersonation session as ${imp.identity.name} has ended.`);
  go(imp.elevationId ? "/portal/elevations" : "/portal/admin/accounts");
}

export function banner(): HTMLElement | null {
  const imp = currentImpersonation();
  const s = currentSession();
  const parts: HTMLElement[] = [];
  if (s?.admin) {
    parts.push(h("div", { class: "banner godmode", role: "region", "aria-label": "GODMODE" },
      h("p", null, h("strong", null, "GODMODE: "), `you are acting as the staff member ${s.name} (${s.email}).`),
      h("button", { type: "button", onclick: () => { const admin = s.admin; endSession(null); if (admin) startSession(admin); go("/portal/admin/staff"); } }, "Return to administrator")));
  }
  if (imp) {
    parts.push(h("div", { class: "banner impersonation", role: "region", "aria-label": "Impersonation session" },
      h("p", null,
        h("strong", null, "Impersonation session: "),
        `acting as ${imp.identity.name} (${imp.identity.email}, ${imp.identity.role === "user" ? "customer" : "provider"}). `,
        imp.elevationId ? "Every request is recorded in the audit trail. " : "GODMODE impersonation. ",
        "Time left: ", h("span", { class: "time-left", "data-expires": String(imp.expiresAt) }, left(imp.expiresAt - Date.now())), ". ",
        h("a", { href: "/portal/session" }, "Open the session")),
      h("button", { type: "button", class: "danger", onclick: () => void endImpersonation() }, "End session")));
  }
  return parts.length ? h("div", { class: "banners" }, parts) : null;
}

/** Updates the time left once a second (text only: the focus stays where it is). */
export function startBannerClock(): void {
  window.setInterval(() => {
    document.querySelectorAll<HTMLElement>(".time-left").forEach((el) => {
      el.textContent = left(Number(el.dataset.expires) - Date.now());
    });
  }, 1000);
  void render;
}

// The staff portal: a small router over the History API (every screen has its own address
// under /portal/, which the binary answers with the same page), the layout (skip link, header,
// the role's navigation, the impersonation banner) and sign-in. Screens are in screens*.ts.
import { api, currentImpersonation, currentSession, data, endSession, onSessionChange, ROLE_NAMES, startSession, tokenExpiry, type Role } from "./api";
import { MarketplaceError } from "@marketplace/client";
import { errorBox, field, fill, h, input, Notice, onSubmit } from "./dom";
import { banner, startBannerClock } from "./banner";
import { ROUTES, type Route } from "./routes";

const app = document.getElementById("app") as HTMLElement;
let notice: string | null = null;

/** Goes to a portal address (pushState) and shows its screen. */
export function go(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render();
}

function match(pathname: string): { route: Route; params: Record<string, string> } | null {
  const path = pathname.replace(/\/+$/, "") || "/portal";
  for (const route of ROUTES) {
    const names: string[] = [];
    const re = new RegExp(
      "^" + route.path.replace(/\/+$/, "").replace(/:(\w+)/g, (_, n: string) => (names.push(n), "([^/]+)")) + "$",
    );
    const m = re.exec(path);
    if (m) return { route, params: Object.fromEntries(names.map((n, i) => [n, decodeURIComponent(m[i + 1] ?? "")])) };
  }
  return null;
}

export function allowed(route: Route, role: Role | undefined): boolean {
  if (!role) return false;
  if (route.roles === "all") return true;
  return route.roles.includes(role);
}

function nav(role: Role): HTMLElement {
  const here = location.pathname.replace(/\/+$/, "") || "/portal";
  const items = ROUTES.filter((r) => r.nav && allowed(r, role) && (!r.needsImpersonation || currentImpersonation()));
  const hrefOf = (r: Route) => r.path.replace(/\/+$/, "") || "/portal";
  // the current page: the link of this address, or the longest one it is under
  const under = items.map(hrefOf).filter((href) => here === href || (href !== "/portal" && here.startsWith(href + "/")));
  const currentHref = under.sort((a, b) => b.length - a.length)[0];
  return h("nav", { "aria-label": "Main" },
    h("ul", null, items.map((r) => {
      const href = hrefOf(r);
      const current = href === currentHref;
      return h("li", null, h("a", { href: href === "/portal" ? "/portal/" : href, "aria-current": current ? "page" : null }, r.nav ?? r.title));
    })));
}

function signIn(): HTMLElement {
  const email = input("email", { type: "email", autocomplete: "username", required: true });
  const password = input("password", { type: "password", autocomplete: "current-password", required: true });
  const admin = h("input", { type: "checkbox", name: "admin", id: "signin-admin" });
  const form = h("form", { class: "card narrow", novalidate: true },
    field("Email", email), field("Password", password),
    h("div", { class: "field check" }, admin, h("label", { for: "signin-admin" }, "Sign in as an administrator (GODMODE, development only)")),
    h("button", { type: "submit" }, "Sign in"));
  onSubmit(form, async (fd) => {
    const body = { email: String(fd.get("email") ?? ""), password: String(fd.get("password") ?? "") };
    if (fd.get("admin")) {
      const s = data(await api.POST("/admin/login", { body }).catch((e: unknown) => {
        // production has no GODMODE: its administrator login answers 404
        throw e instanceof MarketplaceError && e.status === 404 ? new Notice("There is no administrator sign-in on this server: GODMODE exists in development only.") : e;
      }));
      startSession({ token: s.token, role: "admin", id: s.admin.id, name: "Administrator", email: s.admin.email, expiresAt: tokenExpiry(s.token, 24 * 3600e3) });
    } else {
      const s = data(await api.POST("/staff/login", { body }));
      startSession({ token: s.token, role: s.staff.role, id: s.staff.id, name: s.staff.name, email: s.staff.email, expiresAt: tokenExpiry(s.token, 12 * 3600e3) });
    }
    notice = null;
    render();
  });
  return h("main", { id: "main", tabindex: -1 },
    h("h1", { tabindex: -1 }, "Sign in to the staff portal"),
    notice ? h("p", { class: "notice", role: "status" }, notice) : null,
    form);
}

async function signOut(): Promise<void> {
  const s = currentSession();
  if (s) {
    try {
      await api.POST(s.role === "admin" ? "/admin/logout" : "/staff/logout", {});
    } catch {
      /* the token is forgotten here either way */
    }
  }
  endSession(null);
  notice = "You are signed out.";
  go("/portal/", true);
}

let renders = 0;
export function render(): void {
  const s = currentSession();
  const mine = ++renders;
  if (!s) {
    document.title = "Sign in · Staff portal";
    fill(app, signIn());
    app.querySelector<HTMLElement>("h1")?.focus();
    return;
  }
  const found = match(location.pathname);
  const main = h("main", { id: "main", tabindex: -1 });
  const header = h("header", { class: "top" },
    h("a", { href: "/portal/", class: "brand" }, "Staff portal"),
    h("p", { class: "who" }, `${s.name} · ${ROLE_NAMES[s.role]}`),
    h("button", { type: "button", class: "secondary", onclick: () => void signOut() }, "Sign out"));
  fill(app,
    h("a", { href: "#main", class: "skip", onclick: (e: Event) => { e.preventDefault(); main.focus(); } }, "Skip to content"),
    banner(), header, h("div", { class: "layout" }, nav(s.role), main));
  if (!found) {
    document.title = "Not found · Staff portal";
    fill(main, h("h1", { tabindex: -1 }, "Page not found"), h("p", null, "There is no screen at this address. ", h("a", { href: "/portal/" }, "Go home")));
  } else if (!allowed(found.route, s.role)) {
    document.title = "Not available · Staff portal";
    fill(main, h("h1", { tabindex: -1 }, found.route.title), h("p", { role: "alert", class: "error" }, `This screen is not available to the ${ROLE_NAMES[s.role]} role.`));
  } else {
    document.title = `${found.route.title} · Staff portal`;
    const heading = h("h1", { tabindex: -1 }, found.route.title);
    fill(main, heading, notice ? h("p", { class: "notice", role: "status" }, notice) : null);
    notice = null;
    try {
      const content = found.route.render({ params: found.params, query: new URLSearchParams(location.search), heading, go, refresh: render });
      main.append(content);
    } catch (e) {
      main.append(errorBox(e));
    }
  }
  if (mine === renders) (main.querySelector<HTMLElement>("h1") ?? main).focus();
}

/** Shows a message above the next screen. */
export function flash(message: string): void {
  notice = message;
}

document.addEventListener("click", (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = (ev.target as Element | null)?.closest?.("a");
  if (!a || a.target || a.hasAttribute("download")) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/portal")) return;
  ev.preventDefault();
  go(url.pathname + url.search);
});
window.addEventListener("popstate", () => render());
onSessionChange((why) => {
  if (why) notice = why;
  render();
});
startBannerClock();
render();

// The staff portal's browser walk (tests/api/test_portal.py runs it): one headless Chromium
// (Debian's, through playwright-core) against the real binary. Every role signs in (the first by
// keyboard alone); every screen of its navigation opens from the navigation and from its own
// address; axe-core runs on every page (no serious or critical violation); the CSP header is on
// every page load and no console error shows. Customer support refunds a job from the portal and
// sees it in the customer's payments, requests an elevation that the administrator approves in
// the portal, and runs an impersonation session whose requests show in the audit trail, ending
// it from its banner. A phone-width pass checks the main screens at 390 pixels.
//
// Usage: node walk.mjs CONFIG.json   (CONFIG: written by test_portal.py). Prints a JSON report;
// exits 1 with the first failure.
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");
// axe-core goes in through the DevTools protocol (page.evaluate), which the page's CSP does not
// govern: addScriptTag would add an inline script, which the CSP rightly refuses
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const base = cfg.url;
const report = { pages: 0, axe: 0, screens: [], steps: [] };
const consoleErrors = [];
let expectHttpErrors = 0; // while > 0, "Failed to load resource" of a provoked API error is expected
if (cfg.screenshots) mkdirSync(cfg.screenshots, { recursive: true });

function fail(message) {
  throw new Error(message);
}

function step(what) {
  report.steps.push(what);
}

function watch(page) {
  page.on("console", (msg) => {
    if (msg.type() !== "error") return;
    const text = msg.text();
    if (expectHttpErrors > 0 && /Failed to load resource: the server responded with a status of 4\d\d/.test(text)) return;
    consoleErrors.push(`${page.url()}: ${text}`);
  });
  page.on("pageerror", (err) => consoleErrors.push(`${page.url()}: uncaught ${err.message}`));
  page.on("response", (res) => {
    if (res.request().resourceType() !== "document") return;
    const csp = res.headers()["content-security-policy"] ?? "";
    if (!csp.includes("script-src 'self'") || csp.includes("unsafe-inline") || !csp.includes("default-src 'none'"))
      consoleErrors.push(`${res.url()}: missing or weak Content-Security-Policy: ${csp}`);
    report.pages++;
  });
}

async function axe(page, name) {
  if (!(await page.evaluate(() => "axe" in window))) await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
  });
  report.axe++;
  const bad = result.filter((v) => v.impact === "serious" || v.impact === "critical");
  if (bad.length) fail(`axe on ${name} (${page.url()}): ${JSON.stringify(bad)}`);
}

async function heading(page, text) {
  const h1 = page.locator("main h1");
  await h1.filter({ hasText: text }).first().waitFor({ timeout: 15000 }).catch(async () => {
    fail(`expected the heading "${text}" at ${page.url()}, got "${await h1.first().textContent().catch(() => "?")}"`);
  });
  await page.locator("[aria-busy=true]").first().waitFor({ state: "detached", timeout: 15000 }).catch(() => {});
  await page.locator("p.loading").first().waitFor({ state: "detached", timeout: 15000 }).catch(() => {});
}

async function shot(page, name) {
  if (cfg.screenshots) await page.screenshot({ path: join(cfg.screenshots, `${name}.png`) });
}

async function signIn(page, who, { keyboard = false, admin = false } = {}) {
  await page.getByRole("heading", { name: "Sign in to the staff portal" }).waitFor();
  if (keyboard) {
    // the keyboard alone: the heading has the focus; Tab reaches Email, Password, the box, the button
    await page.keyboard.press("Tab");
    await page.keyboard.type(who.email);
    await page.keyboard.press("Tab");
    await page.keyboard.type(who.password);
    if (admin) {
      await page.keyboard.press("Tab");
      await page.keyboard.press("Space");
    }
    await page.keyboard.press("Enter");
  } else {
    await page.getByLabel("Email").fill(who.email);
    await page.getByLabel("Password").fill(who.password);
    if (admin) await page.getByLabel(/Sign in as an administrator/).check();
    await page.getByRole("button", { name: "Sign in" }).click();
  }
  await page.getByRole("button", { name: "Sign out" }).waitFor({ timeout: 15000 });
}

async function signOut(page) {
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in to the staff portal" }).waitFor();
  await page.getByText("You are signed out.").waitFor();
}

/** Every link of the navigation: opened by a click, then from its own address (a fresh load,
 * signed in again: the token lives in memory only), axe on each. */
async function everyScreen(page, who, expected, opts = {}) {
  const links = page.getByRole("navigation", { name: "Main" }).getByRole("link");
  const names = (await links.allTextContents()).map((s) => s.trim());
  for (const want of expected) if (!names.includes(want)) fail(`${who.role}: the navigation lacks "${want}" (has ${names})`);
  const visited = [];
  for (const name of names) {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name, exact: true }).click();
    await page.locator("main h1").first().waitFor();
    await heading(page, "");
    const title = (await page.locator("main h1").first().textContent()).trim();
    const current = await page.getByRole("navigation", { name: "Main" }).locator("[aria-current=page]").textContent();
    if (current.trim() !== name) fail(`${who.role}: ${name} is not marked as the current page`);
    await axe(page, `${who.role} ${name}`);
    visited.push([name, new URL(page.url()).pathname + new URL(page.url()).search, title]);
  }
  for (const [name, path, title] of visited) {
    await page.goto(base + path);
    await signIn(page, who, opts);
    await heading(page, title);
    report.screens.push(`${who.role}: ${name} (${path})`);
  }
  return visited;
}

/** A screen by its address (a fresh load, signed in again) shows its heading; axe on it. */
async function byAddress(page, who, path, title, opts = {}) {
  await page.goto(base + path);
  await signIn(page, who, opts);
  await heading(page, title);
  await axe(page, `${who.role} ${path}`);
  report.screens.push(`${who.role}: ${path}`);
}

const browser = await chromium.launch({ executablePath: cfg.chromium, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
try {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    timezoneId: "America/Chicago",
    locale: "en-US",
    extraHTTPHeaders: { "X-Forwarded-For": cfg.ip },
  });
  const page = await context.newPage();
  watch(page);
  page.setDefaultTimeout(15000);
  const cs = cfg.staff.customer_support, ps = cfg.staff.professional_support;
  const ts = cfg.staff.technical_support, ia = cfg.staff.internal_audit, admin = cfg.admin;

  // ---- customer support: keyboard sign-in, every screen, a refund, an elevation request
  await page.goto(base + "/portal/");
  await axe(page, "sign in");
  await shot(page, "sign-in");
  await signIn(page, cs, { keyboard: true });
  await heading(page, "Home");
  await axe(page, "customer_support home");
  await shot(page, "home-customer-support");
  step("customer_support signed in by keyboard");
  await everyScreen(page, cs, ["Home", "Customers", "Reports", "Disputes", "Elevations", "My audit trail"]);

  // find the customer by email, open the job, refund 10.00
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Customers" }).click();
  await page.getByLabel("Email, name or id").fill(cfg.customer.email);
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByRole("link", { name: cfg.customer.name }).click();
  await heading(page, `Customer: ${cfg.customer.name}`);
  const customerPath = new URL(page.url()).pathname;
  await page.getByRole("link", { name: new RegExp(`job ${cfg.job_id}`) }).click();
  await heading(page, `Job ${cfg.job_id}`);
  await axe(page, "job");
  // an API validation error shows beside its field
  expectHttpErrors++;
  await page.getByLabel("Amount (USD)").fill("0");
  await page.getByLabel("Reason").fill("Provoked");
  await page.getByRole("button", { name: "Refund" }).click();
  const amountError = page.locator(".field:has(#" + (await page.getByLabel("Amount (USD)").getAttribute("id")) + ") .field-error");
  await amountError.waitFor();
  const text = await amountError.textContent();
  if (!/amount/.test(text)) fail(`the amount's error reads "${text}"`);
  expectHttpErrors--;
  await axe(page, "refund form with an error");
  step(`refund validation error beside its field: ${text}`);
  await page.getByLabel("Amount (USD)").fill("10");
  await page.getByLabel("Reason").fill("Portal refund: the lawn was half mown");
  await page.getByRole("button", { name: "Refund", exact: true }).click();
  await heading(page, `Customer: ${cfg.customer.name}`);
  await page.getByText(/Refunded \$10\.00/).first().waitFor();
  const payments = page.getByRole("region", { name: "The customer's payments" });
  await payments.getByRole("cell", { name: "$10.00" }).first().waitFor();
  await page.getByRole("region", { name: "The customer's refunds" }).getByText("Portal refund: the lawn was half mown").waitFor();
  await axe(page, "customer detail");
  await shot(page, "customer");
  step("refund made from the portal shows in the customer's payments");
  report.screens.push(`customer_support: ${customerPath}`);
  // the back button goes back to the job's page, then the search
  await page.goBack();
  await heading(page, `Job ${cfg.job_id}`);
  await page.goBack();
  await heading(page, `Customer: ${cfg.customer.name}`);
  step("back button");

  // request an elevation from the customer's page
  await page.getByRole("link", { name: "Request an elevation to act as this customer" }).click();
  await heading(page, "Request an elevation");
  await axe(page, "request elevation");
  await page.getByLabel("Reason").fill("The customer asked for help with a job");
  await page.getByRole("button", { name: "Request the elevation" }).click();
  await heading(page, "Elevations");
  await page.getByText("Elevation requested").waitFor();
  await page.getByRole("region", { name: /Your elevation requests/ }).getByText("PENDING").first().waitFor();
  step("elevation requested");
  await byAddress(page, cs, customerPath, `Customer: ${cfg.customer.name}`);
  await byAddress(page, cs, `${customerPath}/jobs/${cfg.job_id}`, `Job ${cfg.job_id}`);
  await byAddress(page, cs, `/portal/customers?q=${encodeURIComponent(cfg.customer.name)}`, "Find a customer");
  await byAddress(page, cs, `/portal/elevations/new?targetId=${cfg.customer.id}&targetRole=user`, "Request an elevation");
  await byAddress(page, cs, "/portal/reports?status=open", "Reports");
  await signOut(page);

  // ---- the administrator approves it in the portal (GODMODE)
  await signIn(page, admin, { admin: true });
  await heading(page, "Home");
  await axe(page, "admin home");
  await everyScreen(page, admin, ["Home", "Approvals", "Staff", "Accounts", "Banners", "Generate data"], { admin: true });
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Approvals" }).click();
  await heading(page, "Elevation approvals");
  await shot(page, "admin-approvals");
  await page.getByRole("button", { name: /^Approve the request of .*The customer asked for help with a job/ }).first().click();
  await page.getByText(/approved\./).waitFor();
  step("elevation approved through the portal");
  await byAddress(page, admin, "/portal/admin/elevations?status=APPROVED", "Elevation approvals", { admin: true });
  await page.getByRole("cell", { name: "APPROVED" }).first().waitFor();
  // GODMODE: the same screens as a staff member, and back
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Staff" }).click();
  await heading(page, "Staff members");
  await page.getByRole("button", { name: `Act as ${ia.name}` }).click();
  await page.getByRole("region", { name: "GODMODE" }).waitFor();
  await heading(page, "Home");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sessions audit" }).waitFor();
  await axe(page, "GODMODE acting as a staff member");
  await page.getByRole("button", { name: "Return to administrator" }).click();
  await heading(page, "Staff members");
  step("GODMODE: acted as a staff member and returned");
  await signOut(page);

  // ---- customer support: the impersonation session, its banner, its audit trail
  await signIn(page, cs);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Elevations" }).click();
  await heading(page, "Elevations");
  await page.getByRole("button", { name: "Start session" }).first().click();
  await heading(page, "Impersonation session");
  const banner = page.getByRole("region", { name: "Impersonation session" });
  await banner.getByText(cfg.customer.name).waitFor();
  await banner.getByText(/Time left: \d+:\d\d/).waitFor(); // the server clock may be moved by other tests
  await banner.getByRole("button", { name: "End session" }).waitFor();
  await page.getByRole("region", { name: "The account's jobs" }).waitFor();
  await page.getByRole("region", { name: "Requests made as the account" }).getByText("GET /users/me").waitFor();
  await axe(page, "impersonation session");
  await shot(page, "impersonation-session");
  await page.getByRole("link", { name: `Messages of job ${cfg.job_id}` }).click();
  await heading(page, "Messages of a job");
  await page.getByRole("region", { name: `Messages of job ${cfg.job_id}` }).getByText(cfg.message).waitFor();
  await axe(page, "messages of a job");
  // the banner stays on every page
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Home" }).click();
  await heading(page, "Home");
  await banner.getByRole("button", { name: "End session" }).waitFor();
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Session" }).click();
  await heading(page, "Impersonation session");
  await page.getByRole("region", { name: "Requests made as the account" }).getByText(`GET /jobs/${cfg.job_id}/messages`).waitFor();
  step("impersonation session: banner on every page, requests listed");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "My audit trail" }).click();
  await heading(page, "My audit trail");
  const trail = page.getByRole("region", { name: "Your actions, newest first" });
  await trail.getByText(`GET /jobs/${cfg.job_id}/messages`).first().waitFor();
  await trail.getByText("elevation.request").first().waitFor();
  await axe(page, "my audit trail");
  await shot(page, "audit-trail");
  step("the session's requests are in the audit trail");
  await banner.getByRole("button", { name: "End session" }).click();
  await heading(page, "Elevations");
  await page.getByText(/impersonation session as .* has ended/).waitFor();
  if (await page.getByRole("region", { name: "Impersonation session" }).count()) fail("the banner stayed after End session");
  await page.getByRole("region", { name: /Your elevation requests/ }).getByText("DEACTIVATED").first().waitFor();
  step("session ended from its banner");
  await signOut(page);

  // ---- professional support
  await signIn(page, ps);
  await heading(page, "Home");
  await axe(page, "professional_support home");
  await everyScreen(page, ps, ["Home", "Providers", "Elevations", "My audit trail"]);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Providers" }).click();
  await page.getByLabel("Name, email, company or id").fill(cfg.provider.name);
  await page.getByRole("button", { name: "Search" }).click();
  await page.getByRole("link", { name: cfg.provider.name }).click();
  await heading(page, `Provider: ${cfg.provider.name}`);
  await page.getByRole("heading", { name: "Driver's licence" }).waitFor();
  await page.getByRole("img", { name: "Driver's licence, front" }).waitFor();
  await page.getByRole("img", { name: /Earnings by month/ }).waitFor();
  await axe(page, "provider");
  await shot(page, "provider");
  step("provider: documents, recognition results and ledger chart");
  const providerPath = new URL(page.url()).pathname;
  await byAddress(page, ps, providerPath, `Provider: ${cfg.provider.name}`);
  await byAddress(page, ps, `/portal/providers?q=${encodeURIComponent(cfg.provider.name)}`, "Find a provider");
  await signOut(page);

  // ---- technical support: a ticket read, answered, closed
  await signIn(page, ts);
  await heading(page, "Home");
  await axe(page, "technical_support home");
  await everyScreen(page, ts, ["Home", "Tickets", "Elevations", "My audit trail"]);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Tickets" }).click();
  await page.getByRole("link", { name: cfg.ticket.subject }).click();
  await heading(page, `Ticket: ${cfg.ticket.subject}`);
  await page.getByText(cfg.ticket.body).waitFor();
  await page.getByLabel("Notes (internal)").fill("Asked the customer for a screenshot");
  await page.getByLabel("Status").selectOption("IN_PROGRESS");
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByText("Ticket saved.").waitFor();
  await axe(page, "ticket");
  await shot(page, "ticket");
  await page.getByRole("button", { name: "Close the ticket" }).click();
  await page.getByText("Ticket closed.").waitFor();
  step("ticket answered and closed");
  await byAddress(page, ts, `/portal/tickets/${cfg.ticket.id}`, `Ticket: ${cfg.ticket.subject}`);
  await byAddress(page, ts, "/portal/tickets?status=CLOSED", "Support tickets");
  await signOut(page);

  // ---- internal audit: read-only, sees the session's requests
  await signIn(page, ia);
  await heading(page, "Home");
  await axe(page, "internal_audit home");
  await everyScreen(page, ia, ["Home", "Sessions audit", "Elevations", "My audit trail"]);
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Sessions audit" }).click();
  await heading(page, "Staff sessions audit");
  await page.getByText(`GET /jobs/${cfg.job_id}/messages`).first().waitFor();
  await shot(page, "sessions-audit");
  step("internal audit sees the session's requests");
  // the session ends when its token does: the token is revoked elsewhere (its logout), and the
  // next request signs the page out with a message
  await signOut(page);
  const login = page.waitForResponse((r) => r.url().endsWith("/staff/login") && r.status() === 200);
  await signIn(page, ia);
  const { token } = await (await login).json();
  const out = await fetch(base + "/staff/logout", { method: "POST", headers: { Authorization: `Bearer ${token}`, "X-Forwarded-For": cfg.ip } });
  if (out.status !== 204) fail(`logout elsewhere answered ${out.status}`);
  expectHttpErrors++;
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Elevations" }).click();
  await page.getByText("Your session has ended. Please sign in again.").waitFor();
  await page.getByRole("heading", { name: "Sign in to the staff portal" }).waitFor();
  expectHttpErrors--;
  step("the session ended with its token");
  await context.close();

  // ---- a phone: 390 pixels wide
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, timezoneId: "Europe/Paris", extraHTTPHeaders: { "X-Forwarded-For": cfg.ip } });
  const p2 = await phone.newPage();
  watch(p2);
  p2.setDefaultTimeout(15000);
  await p2.goto(base + "/portal/customers/" + cfg.customer.id);
  await signIn(p2, cs);
  for (const [path, title] of [[`/portal/customers/${cfg.customer.id}`, `Customer: ${cfg.customer.name}`], ["/portal/", "Home"], ["/portal/reports", "Reports"]]) {
    if (new URL(p2.url()).pathname !== path) {
      await p2.evaluate((to) => { history.pushState(null, "", to); dispatchEvent(new PopStateEvent("popstate")); }, path);
    }
    await heading(p2, title);
    const overflow = await p2.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    if (overflow > 1) fail(`${path} is ${overflow} px wider than a 390-pixel screen`);
    await axe(p2, `phone ${path}`);
    if (path === "/portal/") await shot(p2, "phone-home");
  }
  step("phone-width pass");
  await phone.close();
  if (consoleErrors.length) fail(`console errors:\n${consoleErrors.join("\n")}`);
  console.log(JSON.stringify(report));
} catch (e) {
  console.log(JSON.stringify({ ...report, error: String(e && e.stack ? e.stack : e), consoleErrors }));
  process.exitCode = 1;
} finally {
  await browser.close();
}

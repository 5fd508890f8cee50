// A page on another origin that follows the API's live updates with nothing but the browser's
// own EventSource, driven in headless Chromium (Debian's /usr/bin/chromium, through
// playwright-core) for tests/api/test_events_browser.py.
//
// The page is served from http://127.0.0.1:PAGE_PORT and talks to the API at API (the test
// passes http://localhost:PORT: another site, so the session cookie travels cross-site, as for an
// app on its own domain). Its code is what an app writes: one fetch that asks for the session
// cookie with the token, then `new EventSource(url, { withCredentials: true })`, which reconnects
// by itself after drops and restarts, sending the cookie and Last-Event-ID.
//
// Protocol: one JSON line per line of stdin, one JSON line answered on stdout.
//   {"cmd": "state"}  -> {"opens", "errors", "readyState", "got": [{id, kind, data}], "cookieSeen"}
//   {"cmd": "quit"}   -> closes the browser and exits
// It prints {"ready": true} once the page loaded (its stream may still be connecting).
import http from "node:http";
import readline from "node:readline";
import { chromium } from "playwright-core";

const { API, PAGE_PORT, TOKEN, KINDS = "job.created" } = process.env;

const page_html = `<!doctype html><meta charset="utf-8"><title>live</title>
<script type="module">
window.got = []; window.opens = 0; window.errors = 0;
const api = ${JSON.stringify(API)};
// after signing in: the token asks for the cookie that opens the stream from now on
const r = await fetch(api + "/events/session", {
  method: "POST", credentials: "include", headers: { Authorization: "Bearer " + ${JSON.stringify(TOKEN)} } });
window.sessionStatus = r.status;
const source = new EventSource(api + "/events", { withCredentials: true });
window.source = source;
source.onopen = () => window.opens++;
source.onerror = () => window.errors++;
for (const kind of ${JSON.stringify(KINDS.split(","))})
  source.addEventListener(kind, (e) => window.got.push({ id: e.lastEventId, kind, data: JSON.parse(e.data) }));
</script>`;

const server = http.createServer((req, res) => {
  res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
  res.end(page_html);
});
await new Promise((resolve) => server.listen(Number(PAGE_PORT), "127.0.0.1", resolve));

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
const page = await browser.newPage();
page.on("console", (m) => process.stderr.write(`console: ${m.text()}\n`));
page.on("pageerror", (e) => process.stderr.write(`pageerror: ${e}\n`));
await page.goto(`http://127.0.0.1:${PAGE_PORT}/`);
process.stdout.write(JSON.stringify({ ready: true }) + "\n");

const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  const { cmd } = JSON.parse(line);
  if (cmd === "quit") break;
  const state = await page.evaluate(() => ({
    opens: window.opens, errors: window.errors, got: window.got, sessionStatus: window.sessionStatus ?? null,
    readyState: window.source ? window.source.readyState : -1,
    cookieSeen: document.cookie.includes("events_session"),
  }));
  process.stdout.write(JSON.stringify(state) + "\n");
}
await browser.close();
server.close();

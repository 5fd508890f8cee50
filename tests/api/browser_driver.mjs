// A headless Chromium (Debian's /usr/bin/chromium through playwright-core) driven by JSON
// lines, for the API tests that need a real browser: one process and one page per test module
// (browser.py starts it), each command a line on stdin, each answer a line on stdout.
//
// Commands ({"op": ...}):
//   render {html}           shows an email's HTML part; answers its links, the requests it made
//                           (none expected), its scripts and images
//   open {url}              navigates; answers the page (status, content type, title, text)
//   fill {selector, value}  types into a field
//   submit {selector}       clicks and waits for the navigation it causes; answers the page
//   axe                     runs axe-core on the page; answers the violations (id, impact, nodes)
// Every answer has `ok`; a failure answers {ok: false, error}.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const require = createRequire(import.meta.url);
const AXE = require.resolve('axe-core/axe.min.js');

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const context = await browser.newContext({ javaScriptEnabled: true });
const page = await context.newPage();
let requests = [];
page.on('request', (r) => requests.push(r.url()));

async function state(response) {
  return {
    status: response ? response.status() : null,
    contentType: response ? response.headers()['content-type'] || null : null,
    url: page.url(),
    title: await page.title(),
    text: await page.evaluate(() => document.body ? document.body.innerText : ''),
    html: await page.content(),
    requests,
  };
}

const ops = {
  async render({ html }) {
    requests = [];
    await page.route('**/*', (route) => route.abort()); // nothing may load: count, never fetch
    try {
      await page.setContent(html, { waitUntil: 'load' });
      const found = await page.evaluate(() => ({
        links: [...document.querySelectorAll('a')].map((a) => ({
          href: a.getAttribute('href'),
          text: a.textContent.trim(),
          button: a.classList.contains('button'),
          visible: a.getBoundingClientRect().width > 0 && a.getBoundingClientRect().height > 0,
          background: getComputedStyle(a.closest('td') || a).backgroundColor,
        })),
        scripts: document.querySelectorAll('script').length,
        images: document.querySelectorAll('img').length,
        styleSheets: document.querySelectorAll('style, link[rel=stylesheet]').length,
        text: document.body.innerText,
      }));
      return { ...found, requests };
    } finally {
      await page.unroute('**/*');
    }
  },
  async open({ url }) {
    requests = [];
    return state(await page.goto(url));
  },
  async fill({ selector, value }) {
    await page.fill(selector, value);
    return {};
  },
  async submit({ selector }) {
    requests = [];
    const [response] = await Promise.all([page.waitForNavigation(), page.click(selector)]);
    return state(response);
  },
  async axe() {
    await page.addScriptTag({ path: AXE });
    const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    return { violations: result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })) };
  },
};

const lines = createInterface({ input: process.stdin });
process.stdout.write(JSON.stringify({ ok: true, ready: true }) + '\n');
for await (const line of lines) {
  if (!line.trim()) continue;
  const cmd = JSON.parse(line);
  let answer;
  try {
    answer = { ok: true, ...(await ops[cmd.op](cmd)) };
  } catch (e) {
    answer = { ok: false, error: String(e && e.stack ? e.stack : e) };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
}
await browser.close();

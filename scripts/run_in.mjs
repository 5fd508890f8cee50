#!/usr/bin/env node
// Runs the client code of docs/quickstart.md where it runs for real, so the page's browser and
// React Native sections are checked as its curl steps are (scripts/quickstart.py):
//
//   node scripts/run_in.mjs chromium PAGE.html --origin http://localhost:5173 --api http://localhost:PORT \
//        --token TOKEN [--until TEXT]
//     serves PAGE.html at --origin (its own origin: the app's, not the API's), with every
//     "http://localhost:8080" in it read as --api and the token in sessionStorage ("token"), opens
//     it in headless Chromium (Debian's /usr/bin/chromium through playwright-core) and prints
//     each line the page logs (console.log), until a line contains TEXT (exit 0), or until stopped
//     or --timeout ms (default 60000: exit 1 when TEXT never came);
//
//   node scripts/run_in.mjs react-native APP.ts [NAME=VALUE ...]
//     bundles APP.ts with esbuild, `@marketplace/client` being this repository's package
//     (clients/typescript/src), runs it in a React Native-like Node (no crypto.randomUUID, a
//     fetch that cannot stream, xhr2 as XMLHttpRequest, FormData that takes { uri, name, type }:
//     clients/typescript/test/react-native-env.ts) and calls its `main({ NAME: VALUE, ... })`
//     (exit 1 when it has not returned within RUN_IN_TIMEOUT_MS, default 60000).
import { mkdir } from "node:fs/promises";
import { readFile } from "node:fs/promises";
import http from "node:http";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const [mode, file, ...rest] = process.argv.slice(2);

function option(name) {
  const i = rest.indexOf(`--${name}`);
  return i >= 0 ? rest[i + 1] : undefined;
}

async function chromium() {
  const { chromium: browserType } = await import("playwright-core");
  const origin = new URL(option("origin") ?? "http://localhost:5173");
  const api = option("api") ?? "http://localhost:8080";
  const token = option("token") ?? "";
  const until = option("until");
  const limit = Number(option("timeout") ?? 60000);
  const html = (await readFile(file, "utf8")).replaceAll("http://localhost:8080", api);
  const server = http.createServer((req, res) => {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
    res.end(html);
  });
  await new Promise((ok) => server.listen(Number(origin.port || 80), origin.hostname, ok));
  const browser = await browserType.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
  const stop = async (code) => {
    await browser.close().catch(() => {});
    server.close();
    process.exit(code);
  };
  process.on("SIGTERM", () => stop(0));
  process.on("SIGINT", () => stop(0));
  const page = await browser.newPage();
  await page.addInitScript((t) => sessionStorage.setItem("token", t), token);
  page.on("pageerror", (e) => process.stderr.write(`page error: ${e}\n`));
  page.on("console", (m) => {
    if (m.type() !== "log") return;
    process.stdout.write(m.text() + "\n");
    if (until && m.text().includes(until)) void stop(0);
  });
  await page.goto(origin.href);
  // a page that never logs what is awaited ends the run, not the caller's patience
  setTimeout(() => {
    process.stderr.write(`run_in: ${until ? `no line with "${until}"` : "stopped"} after ${limit} ms\n`);
    void stop(until ? 1 : 0);
  }, limit).unref();
}

async function reactNative() {
  const { build } = await import("esbuild");
  const args = Object.fromEntries(rest.map((a) => [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)]));
  const outdir = join(ROOT, "build", "run-in");
  await mkdir(outdir, { recursive: true });
  const outfile = join(outdir, `app-${process.pid}.mjs`);
  const client = join(ROOT, "clients", "typescript");
  await build({
    stdin: {
      contents: `import ${JSON.stringify(join(client, "test", "react-native-env.ts"))};\n` +
        `export { main } from ${JSON.stringify(resolve(file))};\n`,
      resolveDir: process.cwd(),
      loader: "ts",
    },
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node18",
    outfile,
    alias: { "@marketplace/client": join(client, "src", "index.ts") },
    external: ["xhr2"],
    logLevel: "error",
    ignoreAnnotations: true, // the package says sideEffects: false; the environment module is all side effects
  });
  const limit = Number(process.env.RUN_IN_TIMEOUT_MS ?? 60000);
  setTimeout(() => {
    process.stderr.write(`run_in: main() still running after ${limit} ms\n`);
    process.exit(1);
  }, limit).unref();
  const { main } = await import(pathToFileURL(outfile).href);
  try {
    await main(args);
  } finally {
    await import("node:fs/promises").then((fs) => fs.rm(outfile, { force: true }));
  }
  process.exit(0);
}

if (mode === "chromium" && file) await chromium();
else if (mode === "react-native" && file) await reactNative();
else {
  process.stderr.write("usage: run_in.mjs chromium PAGE.html --origin URL --api URL --token T [--until TEXT]\n" +
    "       run_in.mjs react-native APP.ts [NAME=VALUE ...]\n");
  process.exit(2);
}

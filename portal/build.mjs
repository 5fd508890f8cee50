// Builds the staff portal's two assets with esbuild: portal/src/main.ts (and what it imports:
// the marketplace client, openapi-fetch) into OUT/portal.js, portal/src/portal.css into
// OUT/portal.css. The output is deterministic, so tests/api/test_portal.py rebuilds it into a
// temporary directory and compares it with what the binary serves (stale assets fail).
// Usage: node portal/build.mjs OUT_DIR
import { build } from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: node portal/build.mjs OUT_DIR");
  process.exit(2);
}
const common = { bundle: true, minify: true, legalComments: "none", logLevel: "warning", charset: "utf8" };
await build({
  ...common,
  entryPoints: [join(here, "src", "main.ts")],
  outfile: join(out, "portal.js"),
  format: "iife",
  target: ["es2020"],
  platform: "browser",
  tsconfig: join(here, "tsconfig.json"),
});
await build({ ...common, entryPoints: [join(here, "src", "portal.css")], outfile: join(out, "portal.css") });

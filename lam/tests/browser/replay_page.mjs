// The `lam replay --html` page in a real browser (the distribution's
// Chromium, driven by playwright-core): it loads from disk with no console
// error and no network request, every figure it shows equals `--json`'s
// (each carries its `--json` place, `data-k`, and value, `data-v`, and the
// text shown is that value rounded), a `§id` link opens the exact original
// (`lam recall` of the same store), and a screenshot is taken.
//
// usage: node replay_page.mjs PAGE.html REPORT.json LAM STORE SHOT.png
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [page_, report_, lam, store, shot] = process.argv.slice(2);
const report = JSON.parse(readFileSync(report_, "utf8"));
const fail = (m) => { console.error(`replay page: ${m}`); process.exit(1); };

const browser = await chromium.launch({ executablePath: process.env.LAM_CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  const errors = [], requests = [];
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("request", (r) => !r.url().startsWith("file:") && requests.push(r.url()));
  await page.goto(pathToFileURL(page_).href, { waitUntil: "load" });

  // Every figure equals --json's, as value and as text.
  const figs = await page.$$eval("[data-k]", (els) => els.map((e) => ({ k: e.dataset.k, v: e.dataset.v, text: e.textContent })));
  if (figs.length < 20) fail(`only ${figs.length} figures carry their --json place`);
  for (const f of figs) {
    const want = f.k.split(".").reduce((o, p) => (o === undefined ? o : o[p]), report);
    if (want === undefined) fail(`${f.k}: not in --json`);
    if (JSON.stringify(JSON.parse(f.v)) !== JSON.stringify(want)) fail(`${f.k}: the page says ${f.v}, --json ${JSON.stringify(want)}`);
    const shown = f.text.match(/-?[0-9]+(\.[0-9]+)?/);
    if (typeof want === "number" && shown) {
      const decimals = (shown[1] || ".").length - 1;
      if (Math.abs(Number(shown[0]) - want) > 0.5 * 10 ** -decimals + 1e-12) fail(`${f.k}: shows "${f.text}", --json ${want}`);
    }
  }
  const charts = await page.$$eval("svg.context polyline", (l) => l.length);
  const cuts = await page.$$eval("svg.context path.cut", (l) => l.length);
  const made = report.sessions.reduce((a, s) => a + s.per_request.filter((r) => r.cuts > 0).length, 0);
  if (charts < report.sessions.length * 2) fail(`${charts} lines drawn for ${report.sessions.length} session(s)`);
  if (cuts !== made) fail(`${cuts} cuts drawn, --json has ${made} requests with a cut`);

  await page.screenshot({ path: shot, fullPage: false });

  // A §id link opens the exact original.
  const link = await page.$("a[href^='#obs-']");
  if (!link) fail("no §id link on the page");
  const id = (await link.getAttribute("href")).slice("#obs-".length);
  await link.click();
  const open = await page.$eval(`#obs-${id}`, (d) => d.open);
  const text = await page.$eval(`#obs-${id} pre`, (p) => p.textContent);
  const want = execFileSync(lam, ["recall", "--store", store, id]).toString("utf8");
  if (!open) fail(`§${id}: the link did not open its original`);
  if (text !== want) fail(`§${id}: the page's original differs from lam recall's (${text.length} vs ${want.length} chars)`);

  await page.screenshot({ path: shot.replace(/\.png$/, "-recall.png"), fullPage: false });
  if (errors.length) fail(`console errors: ${errors.join("; ")}`);
  if (requests.length) fail(`network requests: ${requests.join(", ")}`);
  console.log(`replay page: ${figs.length} figures equal --json's, ${cuts} cuts drawn, §${id} opens the exact original (${Buffer.byteLength(want)} bytes), 0 console errors, 0 network requests; screenshots ${shot} (top) and its -recall.png (the original opened)`);
} finally {
  await browser.close();
}

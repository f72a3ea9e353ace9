// Drives Debian's chromium (headless, playwright-core from the GenUI cache) over a preview
// page and prints what it saw as one JSON object.
// Usage: node browser.mjs GENUI_HOME PLAN_JSON
// PLAN: {url, screenshot, profile, headers?, click?: [{frame?: bool, name}], fetchFromFrame?}
import { createRequire } from "node:module";
import { join } from "node:path";

const [home, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const { chromium } = createRequire(join(home, "package.json"))("playwright-core");

// Text and controls of a document, shadow roots included (the Lit renderer draws in them).
const deepScan = () => {
  const texts = [];
  const controls = { button: 0, input: 0, textarea: 0, select: 0 };
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE && node.textContent.trim()) texts.push(node.textContent.trim());
    if (node.nodeType === Node.ELEMENT_NODE) {
      const tag = node.tagName.toLowerCase();
      if (tag in controls) controls[tag] += 1;
      if (tag === "script" || tag === "style") return;
      if (node.shadowRoot) walk(node.shadowRoot);
    }
    for (const child of node.childNodes) walk(child);
  };
  walk(document.body);
  return { text: texts.join(" | "), controls };
};

const context = await chromium.launchPersistentContext(plan.profile, {
  executablePath: "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run"],
  extraHTTPHeaders: plan.headers || {},
});
const seen = { console: [], pageErrors: [], failedRequests: [] };
try {
  const page = context.pages()[0] || await context.newPage();
  page.on("console", (m) => seen.console.push({ type: m.type(), text: m.text() }));
  page.on("pageerror", (e) => seen.pageErrors.push(e.message));
  page.on("requestfailed", (r) => seen.failedRequests.push(r.url()));
  const response = await page.goto(plan.url, { waitUntil: "load" });
  seen.status = response.status();
  await page.waitForFunction(() => {
    const frames = [...document.querySelectorAll("iframe.mol-frame")];
    const a2ui = !document.getElementById("mol-a2ui") || document.body.dataset.a2ui === "ready";
    return a2ui && frames.every((f) => f.dataset.ready === "true");
  }, null, { timeout: 20000 });
  await page.waitForTimeout(300);
  seen.page = await page.evaluate(deepScan);
  seen.frames = [];
  for (const frame of page.frames().slice(1)) seen.frames.push(await frame.evaluate(deepScan));
  for (const click of plan.click || []) {
    const scope = click.frame ? page.frameLocator("iframe.mol-frame").first() : page;
    await scope.getByRole("button", { name: click.name }).click();
  }
  if (plan.click) {
    await page.waitForTimeout(300);
    seen.afterClicks = await page.evaluate(deepScan);
    seen.framesAfterClicks = [];
    for (const frame of page.frames().slice(1)) seen.framesAfterClicks.push(await frame.evaluate(deepScan));
  }
  seen.consoleBeforeFetch = [...seen.console];
  if (plan.fetchFromFrame) {
    // Code running inside the sandboxed frame tries the network; the frame's policy must stop it.
    seen.frameFetch = await page.frames()[1].evaluate(async (target) => {
      try {
        const answer = await fetch(target);
        return `fetched: HTTP ${answer.status}`;
      } catch (error) {
        return `failed: ${error.name}: ${error.message}`;
      }
    }, plan.fetchFromFrame);
  }
  await page.screenshot({ path: plan.screenshot, fullPage: true });
} finally {
  await context.close();
}
process.stdout.write(JSON.stringify(seen));

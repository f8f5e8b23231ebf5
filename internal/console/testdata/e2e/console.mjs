// The web console end to end in headless Chromium (playwright-core with
// Debian's /usr/bin/chromium): a refused key, sign in, create a computer,
// a command in the terminal, a file uploaded and downloaded, a Python plot
// and table, the plot's artifact downloaded, audit, a new API key, delete.
// It waits for what each step must show (a step that does not show it
// fails the run), takes a screenshot per step into $SHOTS and prints one
// JSON object of what it saw; internal/console's TestConsoleInBrowser
// checks it and the screenshots.
//
// Chromium runs with --no-sandbox: the tests run as root, and Chromium's
// own sandbox refuses to start as root without it.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const { CONSOLE_URL: url, CUBICLE_KEY: key, SHOTS: shots, CHROMIUM: executablePath = "/usr/bin/chromium" } = process.env;
const out = { steps: [], shots: [], consoleErrors: [], violations: [] };
const T = 60_000;

const browser = await chromium.launch({ executablePath, headless: true, args: ["--no-sandbox"] });
let page;
let step = "launch";
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true, colorScheme: "light" });
  // Violations of the page's Content-Security-Policy, recorded from the first
  // instruction of the document on (Playwright's init script is not itself
  // subject to the policy).
  await context.addInitScript(() => {
    window.__violations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`));
  });
  page = await context.newPage();
  page.setDefaultTimeout(T);
  page.on("console", (m) => { if (m.type() === "error") out.consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => out.consoleErrors.push(`pageerror: ${e.message}`));
  page.on("dialog", (d) => d.accept());

  const shot = async (name, target = page) => {
    const path = join(shots, `${name}.png`);
    await target.screenshot({ path });
    out.shots.push(name);
  };
  // Every form control of the view has a label (its own <label> or an
  // aria-label): those that have none are recorded with the step.
  const unlabelled = () => page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button")]
    .filter((el) => !el.hidden && !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.textContent.trim())
    .map((el) => el.outerHTML.slice(0, 120)));
  out.unlabelled = [];
  const done = async (name) => {
    out.steps.push({ name });
    for (const el of await unlabelled()) out.unlabelled.push(`${name}: ${el}`);
  };
  const download = async (trigger) => {
    const [d] = await Promise.all([page.waitForEvent("download"), trigger()]);
    return { name: d.suggestedFilename(), bytes: readFileSync(await d.path()) };
  };

  step = "login page";
  const resp = await page.goto(url + "/");
  out.csp = resp.headers()["content-security-policy"] || "";
  await page.getByRole("heading", { name: "Sign in to Cubicle" }).waitFor();
  await shot("login");

  step = "refused key";
  await page.getByLabel("API key").fill("cub_not_a_key");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("alert").filter({ hasText: "refused" }).waitFor();
  await done(step);

  step = "sign in";
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { name: "Computers", exact: true }).waitFor();
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Keys" }).waitFor(); // an admin key
  out.stored = await page.evaluate(() => ({ session: sessionStorage.getItem("cubicle.key") !== null, cookies: document.cookie }));
  await done(step);

  step = "create a computer";
  await page.getByLabel("Lifetime (minutes)").fill("15");
  await page.getByRole("button", { name: "Create computer" }).click();
  const link = page.getByRole("link", { name: /^cmp_/ }).first();
  await link.waitFor();
  const id = await link.textContent();
  await page.getByRole("row").filter({ hasText: id }).locator(".badge.ready").waitFor();
  await page.getByRole("row").filter({ hasText: id }).getByText(/ends in/).waitFor();
  out.computer = id;
  await shot("computers");
  await done(step);

  step = "terminal";
  await link.click();
  await page.getByRole("heading", { name: id }).waitFor();
  await page.locator(".term-state").filter({ hasText: "connected" }).waitFor();
  await page.locator("#terminal .xterm-rows").filter({ hasText: "$" }).waitFor(); // the prompt
  await page.locator("#terminal").click();
  await page.keyboard.type("echo console-$((6*7)) $(id -u)");
  await page.keyboard.press("Enter");
  await page.locator("#terminal .xterm-rows").filter({ hasText: /console-42 1000/ }).waitFor();
  out.terminal = (await page.locator("#terminal .xterm-rows").innerText()).replace(/\u00a0/g, " ");
  await shot("terminal");
  await shot("terminal-only", page.locator("#terminal"));
  await done(step);

  step = "files";
  await page.getByRole("navigation", { name: "Computer" }).getByRole("link", { name: "Files" }).click();
  await page.locator("#upload").setInputFiles({ name: "hello.txt", mimeType: "text/plain", buffer: Buffer.from("hello from the browser\n") });
  await page.getByRole("cell", { name: "hello.txt", exact: true }).waitFor();
  const file = await download(() => page.getByRole("button", { name: "Download hello.txt" }).click());
  out.file = { name: file.name, text: file.bytes.toString() };
  await shot("files");
  await done(step);

  step = "python";
  await page.getByRole("navigation", { name: "Computer" }).getByRole("link", { name: "Python" }).click();
  await page.locator("#code").fill([
    "import matplotlib.pyplot as plt",
    "plt.plot([0, 1, 2, 3], [0, 1, 4, 9])",
    "plt.title('squares')",
    "plt.show()",
    "print('cells', 6 * 7)",
    "from IPython.display import HTML, display",
    "df = pd.DataFrame({'alpha': [1, 2], 'beta': ['x', 'y|z']})",
    "display(HTML(df.to_html()))",
    "df",
  ].join("\n"));
  await page.locator("#save-images").check();
  await page.getByRole("button", { name: "Run", exact: true }).click();
  const img = page.locator("img.plot").first();
  await img.waitFor();
  await page.waitForFunction(() => { const i = document.querySelector("img.plot"); return i && i.complete && i.naturalWidth > 0; });
  out.plot = await img.evaluate((i) => ({ width: i.naturalWidth, height: i.naturalHeight, alt: i.alt }));
  await page.locator("pre.stream").filter({ hasText: "cells 42" }).waitFor();
  const frame = page.locator("table.frame");
  await frame.waitFor();
  out.table = await frame.evaluate((t) => [...t.rows].map((r) => [...r.cells].map((c) => c.textContent)));
  // A DataFrame's own repr is text/plain: pandas' aligned text.
  out.repr = await page.locator(".out.result pre").filter({ hasText: "alpha" }).innerText();
  await page.getByRole("button", { name: /^Download .*\.png$/ }).waitFor();
  await page.locator(".cell-status .badge.ready").waitFor();
  await shot("python");
  await shot("python-cell", page.locator("article.cell").first());
  await done(step);

  step = "artifacts";
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Artifacts" }).click();
  await page.getByRole("heading", { name: "Artifacts" }).waitFor();
  const artRow = page.getByRole("row").filter({ hasText: id }).filter({ hasText: ".png" }).first();
  await artRow.waitFor();
  const art = await download(() => artRow.getByRole("button", { name: /^Download / }).click());
  out.artifact = { name: art.name, magic: art.bytes.subarray(0, 8).toString("hex"), bytes: art.bytes.length };
  await shot("artifacts");
  await done(step);

  step = "audit";
  await page.getByRole("link", { name: "Audit and usage" }).click();
  await page.getByRole("cell", { name: "computer.created", exact: true }).first().waitFor();
  await page.getByRole("cell", { name: "computer.terminal_opened", exact: true }).first().waitFor();
  await shot("activity");
  await done(step);

  step = "egress";
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Egress" }).click();
  await page.getByText("Only computers created with a network_policy").waitFor();
  await done(step);

  step = "keys";
  await page.getByRole("link", { name: "Keys" }).click();
  await page.getByRole("button", { name: "Create key" }).waitFor(); // this page's Name field, not the last one's
  const keyName = `console-e2e-${Date.now()}`; // the server may be another run's too
  await page.getByLabel("Name", { exact: true }).fill(keyName);
  await page.getByRole("button", { name: "Create key" }).click();
  out.newSecret = await page.locator("#new-secret").inputValue();
  await page.getByRole("cell", { name: keyName, exact: true }).waitFor();
  await shot("keys");
  await done(step);

  step = "orgs";
  await page.getByRole("link", { name: "Organisations" }).click();
  await page.getByRole("cell", { name: "default", exact: true }).waitFor();
  await done(step);

  step = "scripts";
  await page.getByRole("link", { name: "Scripts" }).click();
  // The organisations page has a Name field too: type once this one shows.
  await page.getByRole("heading", { name: "New script", exact: true }).waitFor();
  const scriptName = `e2e${Date.now()}`; // the server may be another run's too
  await page.getByLabel("Name", { exact: true }).fill(scriptName);
  await page.getByLabel("Description", { exact: true }).fill("Says hello.");
  await page.getByLabel("Source", { exact: true }).fill("echo hello\n");
  await page.getByRole("button", { name: "Create script" }).click();
  await page.getByRole("status").filter({ hasText: `Created script__${scriptName} (version 1)` }).waitFor();
  await page.getByRole("cell", { name: `script__${scriptName}`, exact: true }).waitFor();
  await page.getByRole("button", { name: `Edit ${scriptName}` }).click();
  // The form fills itself from a GET: type once it has.
  await page.getByRole("heading", { name: `Edit script__${scriptName}`, exact: true }).waitFor();
  await page.getByLabel("Description", { exact: true }).fill("Says hello twice.");
  await page.getByRole("button", { name: "Save script" }).click();
  await page.getByRole("status").filter({ hasText: `Saved script__${scriptName} (version 2)` }).waitFor();
  await page.getByRole("cell", { name: "Says hello twice.", exact: true }).waitFor();
  await shot("scripts");
  await page.getByRole("button", { name: `Delete ${scriptName}` }).click();
  await page.getByRole("status").filter({ hasText: `Deleted script__${scriptName}` }).waitFor();
  await page.getByRole("cell", { name: `script__${scriptName}`, exact: true }).waitFor({ state: "detached" });
  await done(step);

  step = "delete";
  await page.getByRole("link", { name: "Computers", exact: true }).click();
  await page.getByRole("button", { name: `Delete ${id}` }).click();
  await page.getByRole("status").filter({ hasText: `Deleted ${id}` }).waitFor();
  await done(step);

  step = "sign out";
  await page.getByRole("button", { name: "Sign out" }).click();
  await page.getByRole("heading", { name: "Sign in to Cubicle" }).waitFor();
  out.afterSignOut = await page.evaluate(() => sessionStorage.getItem("cubicle.key"));
  await done(step);

  out.violations = await page.evaluate(() => window.__violations);
} catch (e) {
  out.error = `${step}: ${e?.message ?? e}`;
  if (page) {
    try { await page.screenshot({ path: join(shots, "failure.png") }); } catch { /* gone */ }
    try { out.violations = await page.evaluate(() => window.__violations); } catch { /* gone */ }
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));

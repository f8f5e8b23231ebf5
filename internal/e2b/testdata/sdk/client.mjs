// The unmodified E2B SDKs against Cubicle, configured only by their
// environment variables (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY): the
// life of a code-interpreter sandbox and of a base one. It prints one JSON
// object of what it saw; internal/e2b's TestE2BSDK checks it.
import { Sandbox } from "@e2b/code-interpreter";
import { Sandbox as BaseSandbox, CommandExitError } from "e2b";

const out = {};
const errorOf = (e) => ({ name: e?.constructor?.name ?? "", message: String(e?.message ?? e) });

// A key Cubicle does not know.
try {
  await Sandbox.create({ apiKey: "cub_not_a_key" });
  out.badKey = { name: "created" };
} catch (e) {
  out.badKey = errorOf(e);
}

const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { purpose: "e2b-sdk-test" } });
out.id = sbx.sandboxId;
out.running = await sbx.isRunning();

// commands.run with stdout/stderr callbacks.
const seen = { stdout: [], stderr: [] };
const r1 = await sbx.commands.run("echo out1; echo err1 >&2; sleep 0.2; echo out2", {
  onStdout: (d) => seen.stdout.push(d),
  onStderr: (d) => seen.stderr.push(d),
});
out.run = { exitCode: r1.exitCode, stdout: r1.stdout, stderr: r1.stderr, callbacks: { stdout: seen.stdout.join(""), stderr: seen.stderr.join("") } };

// A failing command throws CommandExitError with its exit code.
try {
  await sbx.commands.run("echo bad >&2; exit 3");
  out.failed = { name: "no error" };
} catch (e) {
  out.failed = { name: e instanceof CommandExitError ? "CommandExitError" : errorOf(e).name, exitCode: e.exitCode, stderr: e.stderr };
}

// Files: write (making the directory), read, list.
const w = await sbx.files.write("/workspace/sub/hello.txt", "hello from e2b");
out.written = { path: w.path, name: w.name };
await sbx.files.write([
  { path: "/workspace/sub/a.txt", data: "A" },
  { path: "sub/b.bin", data: new Uint8Array([0, 1, 2, 255]).buffer },
]);
out.read = await sbx.files.read("/workspace/sub/hello.txt");
out.readBytes = Array.from(await sbx.files.read("/workspace/sub/b.bin", { format: "bytes" }));
out.listed = (await sbx.files.list("/workspace/sub")).map((e) => `${e.type}:${e.name}:${e.size}`).sort();
out.exists = [await sbx.files.exists("/workspace/sub/a.txt"), await sbx.files.exists("/workspace/nope")];
try {
  await sbx.files.read("/workspace/missing.txt");
  out.missing = { name: "no error" };
} catch (e) {
  out.missing = errorOf(e);
}

// envs and cwd.
const r2 = await sbx.commands.run('echo "$GREETING" && pwd && cat hello.txt', { envs: { GREETING: "hi there" }, cwd: "/workspace/sub" });
out.envCwd = r2.stdout;

// makeDir (false when it exists), rename, remove.
const made = [await sbx.files.makeDir("/workspace/d1/d2"), await sbx.files.makeDir("d1/d2")];
const moved = await sbx.files.rename("/workspace/sub/a.txt", "/workspace/d1/d2/a.txt");
const deep = (await sbx.files.list("d1", { depth: 2 })).map((e) => e.path).sort();
await sbx.files.remove("/workspace/d1");
out.fsOps = { made, moved: moved.path, deep, removed: !(await sbx.files.exists("/workspace/d1")) };

// stdin: written, then closed; connect to a running command.
const cat = await sbx.commands.run("cat", { background: true, stdin: true });
await cat.sendStdin("piped\n");
await cat.closeStdin();
out.stdin = (await cat.wait()).stdout;
const late = await sbx.commands.run("sleep 3; echo late", { background: true });
const attached = await sbx.commands.connect(late.pid);
out.connected = (await attached.wait()).stdout;

// A background command: it runs while others do, is listed, and is waited for.
const bgOut = [];
const bg = await sbx.commands.run("sleep 1; echo bg-done", { background: true, onStdout: (d) => bgOut.push(d) });
out.bgPid = bg.pid;
out.listedPids = (await sbx.commands.list()).map((p) => p.pid);
const during = await sbx.commands.run("echo during");
out.during = during.stdout;
const bgRes = await bg.wait();
out.bg = { exitCode: bgRes.exitCode, stdout: bgRes.stdout, callback: bgOut.join("") };

// A background command killed.
const long = await sbx.commands.run("sleep 100", { background: true });
out.killed = await long.kill();
try {
  await long.wait();
  out.killedWait = { name: "no error" };
} catch (e) {
  out.killedWait = { name: errorOf(e).name, exitCode: e.exitCode };
}
out.killedAgain = await sbx.commands.kill(long.pid);

// runCode: text, stdout, a PNG chart, a table, an error; state persists.
const c1 = await sbx.runCode("x = 6 * 7\nx");
out.codeText = c1.text;
const logs = [];
const c2 = await sbx.runCode("print('hello', x)", { onStdout: (m) => logs.push(m.line) });
out.codeStdout = { logs: c2.logs.stdout, callback: logs };
const c3 = await sbx.runCode(
  "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('e2b chart')\nplt.show()",
);
out.chart = c3.results.map((r) => ({ png: (r.png ?? "").slice(0, 12), formats: r.formats(), main: r.isMainResult }));
const c4 = await sbx.runCode("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3, 19]})");
out.table = c4.results.map((r) => ({ text: r.text, main: r.isMainResult }));
const c5 = await sbx.runCode("1 / 0");
out.codeError = c5.error ? { name: c5.error.name, value: c5.error.value, traceback: c5.error.traceback.includes("ZeroDivisionError") } : null;

// setTimeout moves the end; list finds it with its metadata.
const before = await Sandbox.getInfo(sbx.sandboxId);
await sbx.setTimeout(600_000);
const after = await Sandbox.getInfo(sbx.sandboxId);
out.timeout = { before: before.endAt.getTime() - Date.now(), after: after.endAt.getTime() - Date.now(), state: after.state };
const page = await Sandbox.list({ query: { metadata: { purpose: "e2b-sdk-test" } } }).nextItems();
out.list = page.map((s) => ({ id: s.sandboxId, state: s.state, purpose: s.metadata.purpose }));

// Pause keeps the files; connect resumes.
out.paused = [await sbx.pause(), await sbx.pause(), await sbx.isRunning()];
const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 300_000 });
out.resumed = { same: again.sandboxId === sbx.sandboxId, read: await again.files.read("sub/hello.txt"), state: (await again.getInfo()).state };

// The base SDK's sandbox, its template "base", killed by id.
const base = await BaseSandbox.create("base");
out.base = { id: base.sandboxId, uname: (await base.commands.run("uname -s")).stdout };
out.baseKilled = await BaseSandbox.kill(base.sandboxId);

out.kill = await sbx.kill();
out.killAgain = await Sandbox.kill(sbx.sandboxId);
out.runningAfter = await sbx.isRunning();
try {
  await sbx.commands.run("echo gone");
  out.afterKill = { name: "no error" };
} catch (e) {
  out.afterKill = errorOf(e);
}
process.stdout.write(JSON.stringify(out));

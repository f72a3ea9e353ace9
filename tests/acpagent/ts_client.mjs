// An editor written with the official TypeScript SDK (npm @agentclientprotocol/sdk, its
// client app API) driving `mol acp` over stdio, and what it saw, as one JSON object.
// Usage: node ts_client.mjs PLAN_JSON
// PLAN: {prefix: the npm prefix holding the SDK, command: [argv of mol acp], cwd, clock:
// the MCP server to pass, log: where mol's stderr goes}
// First process: initialize, a new session, a greeting, the clock allowed then rejected, a
// slow turn cancelled once its tool call completed. Second process: the session loaded.
import { spawn } from "node:child_process";
import { openSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const plan = JSON.parse(process.argv[2]);
const entry = createRequire(join(plan.prefix, "package.json")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(entry).href);

async function withMol(answers, run) {
  const child = spawn(plan.command[0], plan.command.slice(1), {
    stdio: ["pipe", "pipe", openSync(plan.log, "a")],
  });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const seen = { updates: [], permissions: [] };
  let wake = () => {};
  const app = acp
    .client({ name: "ts-test-editor" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      seen.updates.push(params.update);
      wake();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      seen.permissions.push({ toolCall: params.toolCall, options: params.options.map((o) => o.kind) });
      const optionId = answers.shift();
      if (!optionId) throw new Error("mol asked for a permission the test did not expect");
      return { outcome: { outcome: "selected", optionId } };
    });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const waitFor = async (predicate) => {
    for (;;) {
      const found = seen.updates.find(predicate);
      if (found) return found;
      await new Promise((resolve) => { wake = resolve; });
    }
  };
  const result = await app.connectWith(stream, (ctx) => run(ctx, seen, waitFor));
  child.stdin.end();
  return { ...seen, result, exitCode: await exited };
}

const text = (t) => [{ type: "text", text: t }];

const first = await withMol(["allow_once", "reject_once"], async (ctx, seen, waitFor) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const { sessionId } = await ctx.request(acp.methods.agent.session.new, {
    cwd: plan.cwd, mcpServers: [plan.clock],
  });
  const stops = [];
  for (const prompt of ["hello there", "clock please", "clock please"]) {
    const done = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: text(prompt) });
    stops.push(done.stopReason);
  }
  const slow = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: text("a slow one") });
  // The slow turn's tool call completed; the answer it leads to is a minute away.
  const calls = new Set(seen.updates.filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId));
  await waitFor((u) => u.sessionUpdate === "tool_call_update" && u.status === "completed" && !calls.has(u.toolCallId));
  await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
  stops.push((await slow).stopReason);
  let badParams;
  try {
    await ctx.request(acp.methods.agent.session.prompt, { sessionId: "conv_nowhere", prompt: text("hi") });
  } catch (error) {
    badParams = { code: error.code, message: error.message };
  }
  return { init, sessionId, stops, badParams };
});

const second = await withMol([], async (ctx, seen) => {
  await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  await ctx.request(acp.methods.agent.session.load, {
    cwd: plan.cwd, sessionId: first.result.sessionId, mcpServers: [plan.clock],
  });
  return { replayed: seen.updates.length };
});

process.stdout.write(JSON.stringify({ first, second }));

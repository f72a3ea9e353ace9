// Writes what the preview's A2UI renderer accepts (run by `mol genui setup`, and by the test
// that the written file still agrees with the installed package).
// Usage: node renderer.mjs HOME [OUT]; writes OUT (default HOME/a2ui-renderer.json), or
// prints it when OUT is "-".
//
// The renderer module is the one a2ui-preview.js feeds (@a2ui/web_core/v0_9). Its own message
// schema (A2uiMessageSchema, a union of one object schema per message type) says which
// `version` values each message type may carry; the checker takes its versions from here, so a
// version the renderer accepts is never refused by the checker, and the reverse.
import { createRequire } from "node:module";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const MODULES = ["@a2ui/web_core/v0_9"];

const [home, out] = process.argv.slice(2);
const require = createRequire(join(home, "package.json"));

// The values a zod schema of a string admits: an enum's options, a literal's value.
const values = (schema) => schema.options ?? (schema.value !== undefined ? [schema.value] : []);

const renderers = {};
for (const module of MODULES) {
  const { A2uiMessageSchema } = await import(pathToFileURL(require.resolve(module)).href);
  const messages = {};
  for (const message of A2uiMessageSchema.options) {
    const keys = Object.keys(message.shape).filter((key) => key !== "version");
    if (keys.length !== 1 || !message.shape.version) {
      throw new Error(`${module}: a message schema with keys ${Object.keys(message.shape)}`);
    }
    messages[keys[0]] = values(message.shape.version);
  }
  renderers[module] = { folder: module.split("/").pop(), messages };
}
const text = JSON.stringify({ renderers }, null, 2) + "\n";
if (out === "-") process.stdout.write(text);
else writeFileSync(out || join(home, "a2ui-renderer.json"), text);

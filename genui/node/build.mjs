// Builds the preview's local modules into <home>/assets (run by `mol genui setup`):
// one React bundle with a small ES module per import specifier, the $ui4a/* runtime stubs,
// and the A2UI preview (the official Lit renderer with its basic catalog).
// Usage: node build.mjs HOME STUBS
import { createRequire } from "node:module";
import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const [home, stubs] = process.argv.slice(2);
const require = createRequire(join(home, "package.json"));
const esbuild = require("esbuild");
const assets = join(home, "assets");
const here = fileURLToPath(new URL(".", import.meta.url));
mkdirSync(join(assets, "ui4a"), { recursive: true });

// Each specifier the import map offers, with the React module it stands for.
const SPECIFIERS = {
  "react": "React",
  "react/jsx-runtime": "JSXRuntime",
  "react-dom": "ReactDOM",
  "react-dom/client": "ReactDOMClient",
};
const production = { "process.env.NODE_ENV": '"production"' };

const entry = Object.entries(SPECIFIERS)
  .map(([specifier, name]) => `import ${name} from ${JSON.stringify(specifier)};`)
  .join("\n") + `\nexport { ${Object.values(SPECIFIERS).join(", ")} };\n`;
await esbuild.build({
  stdin: { contents: entry, resolveDir: home, loader: "js" },
  bundle: true, format: "esm", minify: true, define: production,
  outfile: join(assets, "react-all.js"), logLevel: "error",
});

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
for (const [specifier, name] of Object.entries(SPECIFIERS)) {
  const names = Object.keys(require(specifier)).filter((key) => IDENTIFIER.test(key) && key !== "default");
  const file = specifier.replace("/", "-") + ".js";
  writeFileSync(join(assets, file),
    `import { ${name} } from "./react-all.js";\nexport default ${name};\n` +
    `export const { ${names.join(", ")} } = ${name};\n`);
}

for (const file of readdirSync(stubs)) {
  if (file.endsWith(".js")) copyFileSync(join(stubs, file), join(assets, "ui4a", file));
}

await esbuild.build({
  entryPoints: [join(here, "a2ui-preview.js")], nodePaths: [join(home, "node_modules")],
  bundle: true, format: "esm", minify: true, define: production,
  outfile: join(assets, "a2ui.js"), logLevel: "error",
});

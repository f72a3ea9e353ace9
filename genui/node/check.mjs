// Checks one UI4A TSX module and compiles it for the preview.
// Usage: node check.mjs HOME STUBS < {"code": "..."}; prints {"problems": [...], "compiled": ...}.
// 1. esbuild compiles it (syntax) into the preview's frame script: the module, mounted; its
//    imports stay external, for the frame's import map.
// 2. A walk over the syntax tree refuses imports outside the allowed set and what a sandboxed
//    UI must not do (network APIs, eval, the Function constructor, dynamic import(),
//    require()), and asks for a default export.
// 3. TypeScript type-checks it (strict) with the $ui4a/* stubs' declarations and React's types.
import { createRequire } from "node:module";
import { join } from "node:path";

const [home, stubs] = process.argv.slice(2);
const require = createRequire(join(home, "package.json"));
const esbuild = require("esbuild");
const ts = require("typescript");

const ALLOWED = ["react", "react/jsx-runtime", "react-dom", "react-dom/client",
  "$ui4a/ui", "$ui4a/chat", "$ui4a/state", "$ui4a/fs"];
const NETWORK = new Set(["fetch", "XMLHttpRequest", "WebSocket", "EventSource", "WebTransport",
  "RTCPeerConnection", "sendBeacon", "importScripts", "Worker", "SharedWorker"]);
const APP = join(home, "ui", "app.tsx");

const problem = (line, column, message, rule) => ({ line, column, message, rule });
const NO_DEFAULT = problem(1, 1, "the module has no default export: export the component " +
  "with `export default function App() { ... }`", "export");

// The preview runs the module inside a sandboxed frame: this entry mounts its default export
// under an error guard that reports to the host page.
const BOOTSTRAP = `
import App from "mol:app";
import { Component, createElement } from "react";
import { createRoot } from "react-dom/client";
const report = (message) => parent.postMessage({ type: "ui4a.error", message: String(message) }, "*");
addEventListener("error", (event) => report(event.message));
addEventListener("unhandledrejection", (event) => report(event.reason && event.reason.message || event.reason));
class Guard extends Component {
  constructor(props) { super(props); this.state = { error: null }; }
  static getDerivedStateFromError(error) { return { error }; }
  componentDidCatch(error) { report(error.message); }
  render() {
    return this.state.error
      ? createElement("p", { role: "alert" }, "The UI failed: " + this.state.error.message)
      : this.props.children;
  }
}
createRoot(document.getElementById("root")).render(createElement(Guard, null, createElement(App)));
parent.postMessage({ type: "ui4a.ready" }, "*");
`;

async function compile(code) {
  // Every import of the module stays external (the preview's import map resolves the allowed
  // ones); which are allowed is the syntax walk's to say, at the import's own location
  // (esbuild drops unused imports of a TS file before resolving them).
  const plugin = {
    name: "ui4a",
    setup(build) {
      build.onResolve({ filter: /.*/ }, (args) => args.path === "mol:app"
        ? { path: "app.tsx", namespace: "mol" } : { path: args.path, external: true });
      build.onLoad({ filter: /.*/, namespace: "mol" }, () => ({ contents: code, loader: "tsx" }));
    },
  };
  try {
    const result = await esbuild.build({
      stdin: { contents: BOOTSTRAP, loader: "js", sourcefile: "bootstrap.js" },
      bundle: true, write: false, format: "esm", jsx: "automatic", target: "es2022",
      platform: "browser", plugins: [plugin], logLevel: "silent",
    });
    return { compiled: result.outputFiles[0].text, problems: [] };
  } catch (failure) {
    const problems = (failure.errors || [{ text: String(failure) }]).map((error) =>
      error.location && error.location.file === "bootstrap.js"
        ? NO_DEFAULT  // the mount found nothing to import: the module exports no default
        : problem(error.location ? error.location.line : 1,
          error.location ? error.location.column + 1 : 1, error.text, "syntax"));
    return { compiled: null, problems };
  }
}

function program(code) {
  const options = {
    strict: true, noEmit: true, skipLibCheck: true, esModuleInterop: true,
    target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler, jsx: ts.JsxEmit.ReactJSX,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
    types: [], typeRoots: [join(home, "node_modules", "@types")],
    paths: { "$ui4a/*": [join(stubs, "*.d.ts")] },
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, version, ...rest) => name === APP
    ? ts.createSourceFile(name, code, version, true, ts.ScriptKind.TSX)
    : getSourceFile.call(host, name, version, ...rest);
  host.fileExists = (name) => name === APP || fileExists.call(host, name);
  host.readFile = (name) => name === APP ? code : readFile.call(host, name);
  return ts.createProgram([APP], options, host);
}

function at(file, position) {
  const { line, character } = file.getLineAndCharacterOfPosition(position);
  return [line + 1, character + 1];
}

function typeProblems(prog, file, refused) {
  // A refused import is reported once, by the walk, not again as "cannot find module".
  return ts.getPreEmitDiagnostics(prog, file)
    .filter((d) => d.category === ts.DiagnosticCategory.Error)
    .filter((d) => !(d.code === 2307 && refused.has(d.start)))
    .slice(0, 30)
    .map((d) => {
      const [line, column] = d.file && d.start !== undefined ? at(d.file, d.start) : [1, 1];
      return problem(line, column, `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`, "type");
    });
}

function isGlobal(prog, checker, node) {
  const symbol = checker.getSymbolAtLocation(node);
  if (!symbol || !symbol.declarations || symbol.declarations.length === 0) return !symbol;
  return symbol.declarations.every((d) => prog.isSourceFileDefaultLibrary(d.getSourceFile()));
}

function forbiddenProblems(prog, file) {
  const checker = prog.getTypeChecker();
  const found = [];
  const flag = (node, message) => found.push(problem(...at(file, node.getStart(file)), message, "forbidden"));
  const refused = new Set();
  const visit = (node) => {
    const specifier = (ts.isImportDeclaration(node) || ts.isExportDeclaration(node))
      && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? node.moduleSpecifier : null;
    if (specifier && !ALLOWED.includes(specifier.text)) {
      refused.add(specifier.getStart(file));
      found.push(problem(...at(file, specifier.getStart(file)), `import "${specifier.text}" is ` +
        `not allowed: a UI4A module may import only ${ALLOWED.join(", ")}`, "import"));
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      flag(node, "dynamic import() is not allowed: import modules statically from the allowed set");
      if (node.arguments.length) refused.add(node.arguments[0].getStart(file));
    } else if (ts.isIdentifier(node) && isGlobal(prog, checker, node)) {
      const name = node.text;
      const callee = ts.isCallExpression(node.parent) || ts.isNewExpression(node.parent);
      if (NETWORK.has(name)) {
        flag(node, `${name} reaches the network, which a UI4A module must not do: put the data in the component`);
      } else if (name === "eval") {
        flag(node, "eval is not allowed: write the code directly");
      } else if (name === "Function" && callee && node.parent.expression === node) {
        flag(node, "the Function constructor is not allowed: write the code directly");
      } else if (name === "require" && callee) {
        flag(node, "require() is not allowed: use a static import from the allowed set");
      }
    } else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression)
      && (NETWORK.has(node.argumentExpression.text) || node.argumentExpression.text === "eval")) {
      flag(node, `${node.argumentExpression.text} is not allowed, however it is reached`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  const module = checker.getSymbolAtLocation(file);
  const exported = module ? checker.getExportsOfModule(module).map((s) => s.escapedName) : [];
  if (!exported.includes("default")) found.push(NO_DEFAULT);
  return { found, refused };
}

async function main() {
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const { code } = JSON.parse(input);
  const { compiled, problems } = await compile(code);
  if (problems.length === 0) {
    const prog = program(code);
    const file = prog.getSourceFile(APP);
    const { found, refused } = forbiddenProblems(prog, file);
    problems.push(...found, ...typeProblems(prog, file, refused));
    problems.sort((a, b) => a.line - b.line || a.column - b.column);
  }
  process.stdout.write(JSON.stringify({ problems, compiled: problems.length ? null : compiled }));
}

main().catch((error) => {
  process.stderr.write(String(error && error.stack || error));
  process.exit(1);
});

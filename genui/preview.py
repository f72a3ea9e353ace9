"""The preview page: checked UIs rendered in a browser, from local files only.

- An A2UI stream is drawn on the page by the official Lit renderer (``@a2ui/lit``, bundled
  into ``assets/a2ui.js`` by ``mol genui setup``). The renderer speaks v0.9; a v1.0 stream
  is shown through it after ``for_renderer`` moves v1.0's inline surface contents into the
  v0.9 messages (components and data model), which is all the basic catalog needs.
- A TSX module runs in ``<iframe sandbox="allow-scripts">`` (an opaque origin: no cookies,
  no storage, no access to the page) whose document carries a CSP with
  ``connect-src 'none'`` and scripts only from the page's own ``/ui/assets/``, and an import
  map that points React and the ``$ui4a/*`` modules at those local files.

The page itself allows no network either (``connect-src 'none'``); images must be data URLs.
``ASSETS`` is where the page expects the modules; ``mol serve`` and ``mol genui preview``
serve them there (``asset``), without the API key: they are the same static files for
everyone and a client showing the page in a frame cannot send the key for them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from mol.genui.report import Checked

ASSETS = "/ui/assets"
IMPORTS = {
    "react": "react.js", "react/jsx-runtime": "react-jsx-runtime.js",
    "react-dom": "react-dom.js", "react-dom/client": "react-dom-client.js",
    "$ui4a/ui": "ui4a/ui.js", "$ui4a/chat": "ui4a/chat.js", "$ui4a/state": "ui4a/state.js",
    "$ui4a/fs": "ui4a/fs.js",
}
"""The frame's import map: every module a UI4A module may import, as a local file."""
BASIC_V09 = "https://a2ui.org/specification/v0_9/catalogs/basic/catalog.json"
STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1f24; background: #fff; }
main { max-width: 960px; margin: 0 auto; padding: 16px; }
section.mol-ui { border: 1px solid #d0d7de; border-radius: 8px; margin: 16px 0; padding: 12px; }
section.mol-ui h2 { font-size: 1rem; margin: 0 0 8px; }
.mol-verdict-valid { color: #1a7f37; } .mol-verdict-invalid { color: #b42318; }
iframe.mol-frame { width: 100%; min-height: 320px; border: 1px dashed #d0d7de; }
.mol-log { font-size: 0.85rem; color: #57606a; }
"""
HOST_SCRIPT = """
addEventListener("message", (event) => {
  const data = event.data || {};
  const frame = [...document.querySelectorAll("iframe.mol-frame")]
    .find((f) => f.contentWindow === event.source);
  if (!frame) return;
  const log = frame.parentElement.querySelector(".mol-log");
  if (data.type === "ui4a.ready") frame.dataset.ready = "true";
  if (data.type === "ui4a.sendMessage" || data.type === "ui4a.error") {
    const item = document.createElement("li");
    item.className = data.type === "ui4a.error" ? "mol-frame-error" : "mol-sent";
    item.textContent = data.type === "ui4a.error" ? `error: ${data.message}` : `sent: ${data.text}`;
    log.appendChild(item);
  }
});
"""


def csp(origin: str, frame: bool = False) -> str:
    """The Content-Security-Policy of the page (``frame``: of a TSX frame's document)."""
    scripts = f"{origin}{ASSETS}/"
    parts = ["default-src 'none'", f"script-src 'unsafe-inline' {scripts}",
             "style-src 'unsafe-inline'", "img-src data:", "font-src data:",
             "connect-src 'none'", "form-action 'none'", "base-uri 'none'"]
    if not frame:
        parts.append("frame-src 'self'")
    return "; ".join(parts)


def page(uis: list[Checked], origin: str, title: str = "GenUI preview") -> str:
    """The whole preview page for ``uis``; ``origin`` is the page's own (``http://host:port``),
    which the frames' policy needs since their sandboxed origin is opaque."""
    sections = "\n".join(_section(ui, index, origin) for index, ui in enumerate(uis))
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(origin))}">\n'
            f'<link rel="icon" href="data:,"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head>\n<body><main><h1>{html.escape(title)}</h1>\n"
            f"{sections}\n</main><script>{HOST_SCRIPT}</script></body></html>\n")


def _section(ui: Checked, index: int, origin: str) -> str:
    verdict = "valid" if ui.valid else "invalid"
    label = f"A2UI stream ({ui.version})" if ui.kind == "a2ui" else "UI4A TSX module"
    head = (f'<section class="mol-ui" data-kind="{ui.kind}" data-valid="{str(ui.valid).lower()}"'
            f' id="mol-ui-{index}"><h2>{label}: <span class="mol-verdict-{verdict}">{verdict}'
            f"</span></h2>")
    if not ui.valid:
        items = "".join(f"<li>{html.escape(str(p))}</li>" for p in ui.problems)
        return f'{head}<ul class="mol-problems">{items}</ul></section>'
    if ui.kind == "a2ui":
        data = json.dumps(for_renderer(ui.messages)).replace("<", "\\u003c")
        return (f'{head}<div id="mol-a2ui-root"></div><p class="mol-log" id="mol-a2ui-status">'
                f'</p><ul class="mol-log" id="mol-a2ui-actions"></ul>'
                f'<script type="application/json" id="mol-a2ui">{data}</script>'
                f'<script type="module" src="{ASSETS}/a2ui.js"></script></section>')
    return (f'{head}<iframe class="mol-frame" title="UI4A preview {index + 1}" '
            f'sandbox="allow-scripts" srcdoc="{html.escape(frame(ui, origin))}"></iframe>'
            f'<ul class="mol-log"></ul></section>')


def frame(ui: Checked, origin: str) -> str:
    """The document of a TSX module's sandboxed frame."""
    imports = {name: f"{origin}{ASSETS}/{file}" for name, file in IMPORTS.items()}
    script = (ui.compiled or "").replace("</script", "<\\/script")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(origin, True))}">'
            f'<script type="importmap">{json.dumps({"imports": imports})}</script>'
            f"<style>body {{ font-family: system-ui, sans-serif; margin: 12px; }}</style>"
            f'</head><body><div id="root"></div><script type="module">{script}</script>'
            f"</body></html>")


def for_renderer(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as the v0.9 renderer takes them: v1.0 ones rewritten (their inline
    ``components`` and ``dataModel`` become ``updateComponents`` / ``updateDataModel``, the
    v1.0 basic catalog becomes v0.9's); v0.9 ones as they are."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("version") != "v1.0":
            out.append(message)
            continue
        body = {k: v for k, v in message.items() if k != "version"}
        key = next(iter(body), "")
        inner = dict(body.get(key) or {})
        if key == "createSurface":
            components, data = inner.pop("components", None), inner.pop("dataModel", None)
            inner.pop("metadata", None)
            inner["catalogId"] = BASIC_V09
            out.append({"version": "v0.9", "createSurface": inner})
            surface = {"surfaceId": inner.get("surfaceId")}
            if data is not None:
                out.append({"version": "v0.9", "updateDataModel": {**surface, "value": data}})
            if components:
                out.append({"version": "v0.9",
                            "updateComponents": {**surface, "components": components}})
        elif key in ("updateComponents", "updateDataModel", "deleteSurface"):
            out.append({"version": "v0.9", key: inner})
    return out


def asset(root: Path, name: str) -> Path | None:
    """The file ``name`` under the assets folder, or None (also for paths leaving it)."""
    base = root.resolve()
    target = (base / name).resolve()
    if not target.is_relative_to(base) or not target.is_file():
        return None
    return target

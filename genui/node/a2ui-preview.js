// The A2UI half of the preview page: feeds the page's messages to the official renderer.
// The messages come from <script type="application/json" id="mol-a2ui">; each surface is
// drawn into #mol-a2ui-root, and actions the user triggers are listed in #mol-a2ui-actions.
import { MessageProcessor } from "@a2ui/web_core/v0_9";
import { A2uiSurface, basicCatalog, Context } from "@a2ui/lit/v0_9";
import { ContextProvider } from "@lit/context";
import { renderMarkdown } from "@a2ui/markdown-it";

customElements.get("a2ui-surface") || customElements.define("a2ui-surface", A2uiSurface);
const root = document.getElementById("mol-a2ui-root");
const actions = document.getElementById("mol-a2ui-actions");
const status = document.getElementById("mol-a2ui-status");
new ContextProvider(root, { context: Context.markdown, initialValue: renderMarkdown });

const processor = new MessageProcessor([basicCatalog], (action) => {
  const item = document.createElement("li");
  item.textContent = JSON.stringify(action);
  actions.appendChild(item);
});
processor.onSurfaceCreated((surface) => {
  const element = document.createElement("a2ui-surface");
  element.surface = surface;
  element.dataset.surfaceId = surface.id;
  root.appendChild(element);
});
processor.onSurfaceDeleted((id) => {
  root.querySelector(`[data-surface-id="${CSS.escape(String(id))}"]`)?.remove();
});
try {
  processor.processMessages(JSON.parse(document.getElementById("mol-a2ui").textContent));
  status.textContent = "rendered";
} catch (error) {
  status.textContent = `the renderer refused the messages: ${error.message}`;
}
document.body.dataset.a2ui = "ready";

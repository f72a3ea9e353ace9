// The A2UI half of the preview page: feeds the page's messages to the official renderer.
// The messages come from <script type="application/json" id="mol-a2ui">; each surface is
// drawn into #mol-a2ui-root, and actions the user triggers are listed in #mol-a2ui-actions.
// The renderer's own message schema decides first what it takes (MessageProcessor itself
// does not look at `version`): the page shows what the package accepts, nothing more
// (renderer.mjs reads the same schema for the checker at setup).
import { A2uiMessageSchema, MessageProcessor } from "@a2ui/web_core/v0_9";
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
// The schema of the message's own type (the union's error says only "Invalid input").
const schemaOf = (message) => A2uiMessageSchema.options.find((option) =>
  Object.keys(option.shape).some((key) => key !== "version" && key in Object(message)))
  || A2uiMessageSchema;
const refusal = (message, index) => {
  const parsed = schemaOf(message).safeParse(message);
  return parsed.success ? [] : parsed.error.issues.map(
    (issue) => `message ${index + 1} /${issue.path.join("/")}: ${issue.message}`);
};
try {
  const messages = JSON.parse(document.getElementById("mol-a2ui").textContent);
  const refused = messages.flatMap(refusal);
  if (refused.length) throw new Error(refused.join("; "));
  processor.processMessages(messages);
  status.textContent = "rendered";
} catch (error) {
  status.textContent = `the renderer refused the messages: ${error.message}`;
}
document.body.dataset.a2ui = "ready";

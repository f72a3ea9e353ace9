// $ui4a/chat for the preview: the host page shows the message the UI would send.
export function sendMessage(text) {
  window.parent.postMessage({ type: "ui4a.sendMessage", text: String(text) }, "*");
}

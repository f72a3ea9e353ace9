// $ui4a/ui for the preview: plain React elements with light inline styling.
import { createElement as h, useId, useState } from "react";

const PALETTE = {
  primary: { background: "#1f5fbf", color: "#fff", border: "1px solid #1f5fbf" },
  secondary: { background: "#eef1f5", color: "#1b1f24", border: "1px solid #c9d1db" },
  ghost: { background: "transparent", color: "#1f5fbf", border: "1px solid transparent" },
  danger: { background: "#b42318", color: "#fff", border: "1px solid #b42318" },
};

export function Button({ variant = "secondary", size = "md", style, ...props }) {
  const pad = size === "sm" ? "2px 8px" : "6px 14px";
  return h("button", {
    type: "button", ...props,
    style: { borderRadius: 6, padding: pad, cursor: "pointer", font: "inherit",
      ...PALETTE[variant], ...style },
  });
}

export function Field({ label, hint, id, style, ...props }) {
  const fallback = useId();
  const inputId = id || fallback;
  return h("div", { style: { display: "flex", flexDirection: "column", gap: 4, ...style } },
    h("label", { htmlFor: inputId, style: { fontWeight: 600 } }, label),
    h("input", { id: inputId, ...props,
      style: { padding: "6px 8px", borderRadius: 6, border: "1px solid #c9d1db", font: "inherit" } }),
    hint ? h("small", { style: { color: "#57606a" } }, hint) : null);
}

export function Card({ style, ...props }) {
  return h("div", { ...props,
    style: { background: "#f6f8fa", borderRadius: 8, padding: 12, ...style } });
}

export function Badge({ style, ...props }) {
  return h("span", { ...props,
    style: { background: "#eef1f5", borderRadius: 999, padding: "1px 8px", fontSize: "0.85em",
      ...style } });
}

export function Tabs({ items, value, onChange }) {
  const [own, setOwn] = useState(items[0] ? items[0].id : undefined);
  const current = value !== undefined ? value : own;
  const select = (id) => { setOwn(id); if (onChange) onChange(id); };
  const shown = items.find((item) => item.id === current);
  return h("div", null,
    h("div", { role: "tablist", style: { display: "flex", gap: 4 } },
      items.map((item) => h("button", {
        key: item.id, type: "button", role: "tab", "aria-selected": item.id === current,
        onClick: () => select(item.id),
        style: { border: "none", borderBottom: item.id === current ? "2px solid #1f5fbf"
          : "2px solid transparent", background: "none", padding: "4px 10px", cursor: "pointer",
          font: "inherit" },
      }, item.label))),
    h("div", { role: "tabpanel", style: { paddingTop: 8 } }, shown ? shown.children : null));
}

export function Disclosure({ title, children, defaultOpen = false }) {
  const [open, setOpen] = useState(defaultOpen);
  return h("div", null,
    h("button", { type: "button", "aria-expanded": open, onClick: () => setOpen(!open),
      style: { background: "none", border: "none", padding: 0, cursor: "pointer",
        font: "inherit", fontWeight: 600 } }, (open ? "▾ " : "▸ "), title),
    h("div", { hidden: !open, style: { paddingTop: 6 } }, children));
}

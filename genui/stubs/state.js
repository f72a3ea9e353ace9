// $ui4a/state for the preview: the sandboxed frame has no storage, so state lives in memory.
import { useState } from "react";

const kept = new Map();

export function usePersistedState(key, initial) {
  const [value, setValue] = useState(() => {
    if (kept.has(key)) return kept.get(key);
    return typeof initial === "function" ? initial() : initial;
  });
  const update = (next) => setValue((previous) => {
    const resolved = typeof next === "function" ? next(previous) : next;
    kept.set(key, resolved);
    return resolved;
  });
  return [value, update];
}

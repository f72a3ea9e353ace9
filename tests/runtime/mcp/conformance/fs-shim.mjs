// node:fs as it is, plus the globSync Node 20 lacks (only tier-check calls it).
export * from "node:fs";
export { default } from "node:fs";

export function globSync() {
  throw new Error("fs.globSync needs Node 22: tier-check cannot run on this Node");
}

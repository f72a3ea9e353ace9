// Lets the conformance suite's client scenarios run on Node 20: its bundle imports
// fs.globSync (Node 22), used only by its tier-check command. Loaded with
// `node --import ./node20.mjs`; every other import resolves as usual.
import { register } from "node:module";

register("./fs-loader.mjs", import.meta.url);

// $ui4a/fs for the preview: no workspace is attached, so every file operation is refused.
function unavailable(path) {
  return Promise.reject(new Error(`files are not available in the preview (${path})`));
}

export function readFile(path) { return unavailable(path); }
export function writeFile(path) { return unavailable(path); }

// $ui4a/fs: UTF-8 files under the session's .artifacts/ folder.
export declare function readFile(path: string): Promise<string>;
export declare function writeFile(path: string, content: string): Promise<void>;

// $ui4a/chat: start a user turn from the UI (only on an explicit user action).
export declare function sendMessage(text: string): void;

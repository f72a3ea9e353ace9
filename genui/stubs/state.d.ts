// $ui4a/state: JSON state kept per session and surface, restored after a reload.
import type { Dispatch, SetStateAction } from "react";

export declare function usePersistedState<T>(
  key: string,
  initial: T | (() => T),
): [T, Dispatch<SetStateAction<T>>];

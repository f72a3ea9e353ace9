// $ui4a/ui: the small component library a UI4A module may import (types the checker uses).
import type {
  ButtonHTMLAttributes, HTMLAttributes, InputHTMLAttributes, ReactNode,
} from "react";

export interface ButtonProps extends ButtonHTMLAttributes<HTMLButtonElement> {
  variant?: "primary" | "secondary" | "ghost" | "danger";
  size?: "sm" | "md";
}
export declare function Button(props: ButtonProps): ReactNode;

export interface FieldProps extends InputHTMLAttributes<HTMLInputElement> {
  label: string;
  hint?: string;
}
export declare function Field(props: FieldProps): ReactNode;

export declare function Card(props: HTMLAttributes<HTMLDivElement>): ReactNode;
export declare function Badge(props: HTMLAttributes<HTMLSpanElement>): ReactNode;

export interface TabItem {
  id: string;
  label: ReactNode;
  children: ReactNode;
}
export interface TabsProps {
  items: TabItem[];
  value?: string;
  onChange?: (id: string) => void;
}
export declare function Tabs(props: TabsProps): ReactNode;

export interface DisclosureProps {
  title: ReactNode;
  children: ReactNode;
  defaultOpen?: boolean;
}
export declare function Disclosure(props: DisclosureProps): ReactNode;

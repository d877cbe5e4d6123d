import type { AnchorHTMLAttributes, MouseEvent } from "react";
import { navigate } from "../../lib/router";

/** Client-side navigation for plain links, keeping modified clicks (new tab) native. */
export function follow(e: MouseEvent<HTMLAnchorElement>) {
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(e.currentTarget.getAttribute("href") ?? "/");
}

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  return <a {...props} onClick={follow} />;
}

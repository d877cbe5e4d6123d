import { follow } from "../common/Link";
import { linkTo } from "../../lib/router";

export const DECIDE_PAGES = [
  { path: "/decide/compression", label: "Compression" },
  { path: "/decide/replication", label: "Replication" },
  { path: "/decide/placement", label: "Placement" },
  { path: "/decide/timeouts", label: "Timeouts" },
  { path: "/decide/rankings", label: "Rankings" },
  { path: "/decide/pricing", label: "Prices" },
];

/** The Decide section's own navigation, above each advisor page. */
export function DecideNav({ current }: { current: string }) {
  return (
    <nav aria-label="Decide" className="subnav">
      {DECIDE_PAGES.map((p) => (
        <a key={p.path} href={linkTo(p.path)} onClick={follow} aria-current={p.path === current ? "page" : undefined}>
          {p.label}
        </a>
      ))}
    </nav>
  );
}

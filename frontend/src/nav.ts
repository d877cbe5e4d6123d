// The navigation. Pages for alerts and throughput slot in here as they are built.
export interface NavItem {
  path: string;
  label: string;
}

export const NAV: NavItem[] = [
  { path: "/overview", label: "Overview" },
  { path: "/alerts", label: "Alerts" },
  { path: "/distributions", label: "Distributions" },
  { path: "/storage", label: "Storage" },
  { path: "/decide", label: "Decide" },
  { path: "/fleet", label: "Fleet" },
  { path: "/settings", label: "Settings" },
];

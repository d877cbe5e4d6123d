// The navigation.
export interface NavItem {
  path: string;
  label: string;
}

export const NAV: NavItem[] = [
  { path: "/overview", label: "Overview" },
  { path: "/alerts", label: "Alerts" },
  { path: "/distributions", label: "Distributions" },
  { path: "/storage", label: "Storage" },
  { path: "/throughput", label: "Throughput" },
  { path: "/decide", label: "Decide" },
  { path: "/fleet", label: "Fleet" },
  { path: "/settings", label: "Settings" },
];

// Renders a page as the app does: a fresh query client (no retries, so an error shows at once)
// and the theme. Import it only after setOrigin, like the page under test.
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ComponentType } from "react";
import { ThemeProvider } from "../lib/theme";

export function renderPage(Page: ComponentType): void {
  const qc = new QueryClient({ defaultOptions: { queries: { retry: false } } });
  render(
    <QueryClientProvider client={qc}>
      <ThemeProvider>
        <Page />
      </ThemeProvider>
    </QueryClientProvider>,
  );
}

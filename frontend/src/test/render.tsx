// Renders as the app does: the app's query client, emptied (and without retries, so an error
// shows at once), and the theme. Import it only after setOrigin, like the component under test.
import { QueryClientProvider } from "@tanstack/react-query";
import { render } from "@testing-library/react";
import type { ComponentType, ReactNode } from "react";
import { queryClient } from "../api/queryClient";
import { ThemeProvider } from "../lib/theme";

export function renderWithClient(ui: ReactNode): void {
  // One cache, as in the app: API helpers read the fleet from it too.
  queryClient.clear();
  queryClient.setDefaultOptions({ queries: { retry: false } });
  render(
    <QueryClientProvider client={queryClient}>
      <ThemeProvider>{ui}</ThemeProvider>
    </QueryClientProvider>,
  );
}

export function renderPage(Page: ComponentType): void {
  renderWithClient(<Page />);
}

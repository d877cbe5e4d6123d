// The UI's one cache of server state: pages read it through hooks, and API helpers that are
// not components (e.g. names for agent ids) read it with fetchQuery, so both share each key.
import { QueryClient } from "@tanstack/react-query";

// A short staleness keeps lists current without refetching on every focus.
export const QUERY_DEFAULTS = { queries: { staleTime: 5_000, refetchOnWindowFocus: false, retry: 1 } } as const;

export const queryClient = new QueryClient({ defaultOptions: QUERY_DEFAULTS });

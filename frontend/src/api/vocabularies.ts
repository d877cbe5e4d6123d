import { useQuery } from "@tanstack/react-query";
import { api as client, unwrap } from "./http";
import type { components } from "./schema";

/** Every closed list of values the API accepts (GET /vocabularies), in display order. */
export type Vocabularies = components["schemas"]["Vocabularies"];

export async function getVocabularies(signal?: AbortSignal): Promise<Vocabularies> {
  return unwrap(await client.GET("/api/v1/vocabularies", { signal }));
}

/** The vocabularies, fetched once per session and shared by every page that offers a choice. */
export function useVocabularies() {
  return useQuery({ queryKey: ["vocabularies"], queryFn: ({ signal }) => getVocabularies(signal), staleTime: Infinity, gcTime: Infinity });
}

// Display names keyed by the API's value; a value without one shows as itself.
export const TOPOLOGY_LABELS: Record<string, string> = {
  same_subnet: "same subnet",
  cross_subnet: "cross subnet",
  cross_az: "cross AZ",
  cross_region: "cross region",
  cross_provider: "cross provider",
};

export const topologyLabel = (value: string): string => TOPOLOGY_LABELS[value] ?? value;

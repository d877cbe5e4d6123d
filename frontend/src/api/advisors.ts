// The advisors and the pricing catalog over the generated client (used with TanStack Query).
import { api, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
export type PricingCatalog = S["PricingCatalog"];
export type PriceFigure = S["PriceFigure"];
export type PriceItem = S["PriceFigure"]["item"];
export type CompressionIn = S["CompressionIn"];
export type CompressionOut = S["CompressionOut"];
export type ReplicationIn = S["ReplicationIn"];
export type ReplicationOut = S["ReplicationOut"];
export type PlacementIn = S["PlacementIn"];
export type PlacementOut = S["PlacementOut"];
export type TimeoutIn = S["TimeoutIn"];
export type TimeoutOut = S["TimeoutOut"];
export type RankingOut = S["RankingOut"];
export type StorageTarget = S["StorageTargetPublic"];

export interface RankingQuery {
  kind: "mesh" | "storage" | "throughput";
  level: "provider" | "region" | "region_pair" | "pair";
  stat: string;
  op?: string;
  size_bytes?: number;
}

export async function getPricing(signal?: AbortSignal): Promise<PricingCatalog> {
  return unwrap(await api.GET("/api/v1/pricing", { signal }));
}

export async function setPrice(provider: string, region: string, item: PriceItem, price_usd: number, source: string): Promise<PriceFigure> {
  return unwrap(
    await api.PUT("/api/v1/pricing/{provider}/{region}/{item}", {
      params: { path: { provider, region, item } },
      body: { price_usd, source },
    }),
  );
}

export async function clearPrice(provider: string, region: string, item: PriceItem): Promise<void> {
  const r = await api.DELETE("/api/v1/pricing/{provider}/{region}/{item}", { params: { path: { provider, region, item } } });
  unwrap({ ...r, data: undefined });
}

export async function listTargets(signal?: AbortSignal): Promise<StorageTarget[]> {
  return unwrap(await api.GET("/api/v1/storage-targets", { signal }));
}

export async function adviseCompression(body: CompressionIn): Promise<CompressionOut> {
  return unwrap(await api.POST("/api/v1/advisors/compression", { body }));
}

export async function adviseReplication(body: ReplicationIn): Promise<ReplicationOut> {
  return unwrap(await api.POST("/api/v1/advisors/replication", { body }));
}

/** Cached, computed in the request, or queued for the worker (status "pending": poll). */
export async function advisePlacement(body: PlacementIn): Promise<PlacementOut> {
  const r = await api.POST("/api/v1/advisors/placement", { body });
  return unwrap(r) as PlacementOut;
}

export async function getPlacement(inputHash: string, signal?: AbortSignal): Promise<PlacementOut> {
  const r = await api.GET("/api/v1/advisors/placement/{input_hash}", { params: { path: { input_hash: inputHash } }, signal });
  return unwrap(r) as PlacementOut;
}

export async function adviseTimeout(body: TimeoutIn): Promise<TimeoutOut> {
  return unwrap(await api.POST("/api/v1/advisors/timeout", { body }));
}

export async function getRankings(q: RankingQuery, signal?: AbortSignal): Promise<RankingOut> {
  return unwrap(await api.GET("/api/v1/advisors/rankings", { params: { query: q }, signal }));
}

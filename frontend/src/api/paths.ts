import { isoInstant as iso } from "../lib/format";
import type { RangeQuery } from "./analytics";
import { api, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
export type Hop = S["HopPublic"];
export type Trace = S["TracePublic"];
export type PairPathVM = S["PathPublic"];
export type PathChange = S["PathChangePublic"];

export interface PairRef extends RangeQuery {
  src: string;
  dst: string;
}

/** The pair's path changes in the range, oldest first. */
export async function getPathChanges(q: PairRef, signal?: AbortSignal): Promise<PathChange[]> {
  const r = unwrap(await api.GET("/api/v1/analytics/paths/changes", { params: { query: { src: q.src, dst: q.dst, start: iso(q.fromMs), end: iso(q.toMs) } }, signal }));
  return r.changes;
}

/** The pair's traces in the range, newest first (at most 200). */
export async function getPathTraces(q: PairRef, signal?: AbortSignal): Promise<Trace[]> {
  const r = unwrap(await api.GET("/api/v1/analytics/paths/traces", { params: { query: { src: q.src, dst: q.dst, start: iso(q.fromMs), end: iso(q.toMs), limit: 200 } }, signal }));
  return r.traces;
}

export async function getCurrentPath(src: string, dst: string, signal?: AbortSignal): Promise<PairPathVM | null> {
  return unwrap(await api.GET("/api/v1/analytics/paths/current", { params: { query: { src, dst } }, signal })).path;
}

export type TraceDiff = S["TraceDiffResponse"];

/** Where two traces' paths differ, by the server's path identity (ECMP siblings, silent hops):
 * the differing TTLs, the first of them and the RTT added there. */
export async function getTraceDiff(a: string, b: string, signal?: AbortSignal): Promise<TraceDiff> {
  return unwrap(await api.GET("/api/v1/analytics/paths/diff", { params: { query: { a, b } }, signal }));
}

/** Asks the src agent to trace the path to dst at its next config poll. */
export async function requestTrace(src: string, dst: string): Promise<S["TraceRequestAccepted"]> {
  return unwrap(await api.POST("/api/v1/analytics/paths/requests", { body: { src, dst } }));
}

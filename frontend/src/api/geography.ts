import { isoInstant as iso } from "../lib/format";
import type { RangeQuery } from "./analytics";
import { api, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
export type Place = S["PlacePublic"];
export type StretchPair = S["StretchPair"];
export type Detour = S["Detour"];

export async function getPlaces(signal?: AbortSignal): Promise<S["PlacesResponse"]> {
  return unwrap(await api.GET("/api/v1/geography/places", { signal }));
}

export async function getStretch(q: RangeQuery, signal?: AbortSignal): Promise<S["StretchResponse"]> {
  return unwrap(await api.GET("/api/v1/analytics/mesh/stretch", { params: { query: { start: iso(q.fromMs), end: iso(q.toMs) } }, signal }));
}

export async function getDetours(q: RangeQuery, signal?: AbortSignal): Promise<S["DetoursResponse"]> {
  return unwrap(await api.GET("/api/v1/analytics/mesh/detours", { params: { query: { start: iso(q.fromMs), end: iso(q.toMs), level: "region" } }, signal }));
}

/** A metro on the map, with the fleet's regions in it. */
export interface MetroVM {
  metro: string;
  lat: number;
  lon: number;
  regions: string[];
}

/** The link between two metros: its slowest path (the one a look at the map is for). */
export interface LinkVM {
  a: string;
  b: string;
  p50Us: number;
  stretch: number | null;
  floorUs: number;
  paths: number;
}

/** Metros and the links between them from the stretch answer, placed by the org's places. */
export function mapOf(places: Place[], pairs: StretchPair[]): { metros: MetroVM[]; links: LinkVM[] } {
  const where = new Map(places.map((p) => [`${p.provider}/${p.region}`, p]));
  const metros = new Map<string, MetroVM>();
  const add = (provider: string, region: string) => {
    const p = where.get(`${provider}/${region}`);
    if (!p) return;
    const m = metros.get(p.metro) ?? { metro: p.metro, lat: p.lat, lon: p.lon, regions: [] };
    if (!m.regions.includes(`${provider}/${region}`)) m.regions.push(`${provider}/${region}`);
    metros.set(p.metro, m);
  };
  const links = new Map<string, LinkVM>();
  for (const x of pairs) {
    add(x.src_provider, x.src);
    add(x.dst_provider, x.dst);
    if (x.src_metro === x.dst_metro) continue;
    const [a, b] = [x.src_metro, x.dst_metro].sort() as [string, string];
    const key = `${a}|${b}`;
    const l = links.get(key);
    if (!l) links.set(key, { a, b, p50Us: x.p50_us, stretch: x.stretch, floorUs: x.floor_us, paths: 1 });
    else {
      l.paths += 1;
      if (x.p50_us > l.p50Us) Object.assign(l, { p50Us: x.p50_us, stretch: x.stretch });
    }
  }
  return { metros: [...metros.values()].sort((x, y) => x.metro.localeCompare(y.metro)), links: [...links.values()] };
}

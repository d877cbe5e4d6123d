import { api, unwrap } from "./http";
import type { components } from "./schema";

export type OtlpExport = components["schemas"]["OtlpExportPublic"];
export type OtlpExportIn = components["schemas"]["OtlpExportIn"];
export type OtlpPushResult = components["schemas"]["OtlpPushResult"];

/** The org's OTLP push, or null when none is set up. */
export async function getOtlpExport(signal?: AbortSignal): Promise<OtlpExport | null> {
  const r = await api.GET("/api/v1/export/otlp", { signal });
  if (r.response.status === 404) return null;
  return unwrap(r);
}

export async function saveOtlpExport(body: OtlpExportIn): Promise<OtlpExport> {
  return unwrap(await api.PUT("/api/v1/export/otlp", { body }));
}

export async function deleteOtlpExport(): Promise<void> {
  unwrap(await api.DELETE("/api/v1/export/otlp"));
}

export async function testOtlpExport(): Promise<OtlpPushResult> {
  return unwrap(await api.POST("/api/v1/export/otlp/test"));
}

/** "Name: value" lines as headers; the first line that is not one names the problem. */
export function parseHeaders(text: string): Record<string, string> | string {
  const out: Record<string, string> = {};
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf(":");
    if (at <= 0) return `line ${i + 1}: write it as Name: value`;
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

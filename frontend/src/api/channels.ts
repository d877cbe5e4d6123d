// Notification channels (/api/v1/channels) and their deliveries (/api/v1/deliveries).
import { api as client, unwrap } from "./http";
import { arr, ms, num, obj, str } from "./decode";
import type { components, paths } from "./schema";

type S = components["schemas"];

/** A channel kind's name, one of GET /vocabularies' channel_kinds. */
export type ChannelType = S["ChannelPublic"]["kind"];

export interface ChannelVM {
  id: string;
  name: string;
  type: ChannelType;
  /** settings the API shows back (never a password or secret) */
  config: Record<string, unknown>;
  createdMs: number;
}

export interface DeliveryVM {
  id: string;
  channelId: string;
  channelName: string;
  alertIds: string[];
  ruleId: string | null;
  ruleName: string;
  kind: string;
  status: string;
  attempts: number;
  error: string | null;
  /** the receiving server's reply (SMTP reply, HTTP status and the service's error code) */
  response: string | null;
  atMs: number;
}

// ---- defensive readers: evidence is free-form JSON ----
function toChannel(v: unknown): ChannelVM {
  const c = obj(v);
  return { id: str(c.id), name: str(c.name), type: str(c.kind ?? c.type) as ChannelType, config: obj(c.config ?? c.settings), createdMs: ms(c.created_at) ?? 0 };
}

export async function listChannels(signal?: AbortSignal): Promise<ChannelVM[]> {
  return arr(unwrap(await client.GET("/api/v1/channels", { signal }))).map(toChannel);
}

/** Creates a channel; a webhook's signing secret comes back here once and never again. */
export type ChannelCreate = paths["/api/v1/channels"]["post"]["requestBody"]["content"]["application/json"];

export async function createChannel(body: ChannelCreate): Promise<{ channel: ChannelVM; secret: string | null }> {
  const r = unwrap(await client.POST("/api/v1/channels", { body }));
  return { channel: toChannel(r), secret: r.signing_secret || null };
}

export async function deleteChannel(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/channels/{channel_id}", { params: { path: { channel_id: id } } }));
}

export interface TestSendVM {
  ok: boolean;
  detail: string;
}

/** A test send; the server's own reply (SMTP reply, HTTP status and body) comes back verbatim. */
export async function testChannel(id: string): Promise<TestSendVM> {
  const r = await client.POST("/api/v1/channels/{channel_id}/test", { params: { path: { channel_id: id } } });
  if (r.data) return { ok: r.data.ok, detail: r.data.detail };
  // Not a send result (unknown channel, no right to test): the API's own message.
  const detail = obj(r.error).detail;
  return { ok: false, detail: typeof detail === "string" ? detail : JSON.stringify(detail ?? `HTTP ${r.response.status}`) };
}

function toDelivery(v: unknown): DeliveryVM {
  const d = obj(v);
  return {
    id: str(d.id),
    channelId: str(d.channel_id),
    channelName: str(d.channel_name ?? obj(d.channel).name),
    alertIds: arr(d.alert_ids).map((x) => str(x)),
    ruleId: typeof d.rule_id === "string" ? d.rule_id : null,
    ruleName: str(d.rule_name),
    kind: str(d.notification_kind ?? d.kind),
    status: str(d.state ?? d.status),
    attempts: num(d.attempts) ?? 0,
    error: typeof d.last_error === "string" ? d.last_error : null,
    response: typeof d.response === "string" ? d.response : null,
    atMs: ms(d.sent_at ?? d.updated_at ?? d.created_at) ?? 0,
  };
}

export async function listDeliveries(q: { channelId?: string; alertId?: string; ruleId?: string } = {}, signal?: AbortSignal): Promise<DeliveryVM[]> {
  const rows = q.channelId
    ? unwrap(await client.GET("/api/v1/channels/{channel_id}/deliveries", { params: { path: { channel_id: q.channelId } }, signal }))
    : unwrap(await client.GET("/api/v1/deliveries", { params: { query: { alert_id: q.alertId, rule_id: q.ruleId } }, signal }));
  return rows.map(toDelivery);
}

// ---- silences and maintenance ----

// Silences (/api/v1/silences): alerts muted for a while by rule or label matchers.
import { api as client, unwrap } from "./http";
import { arr, ms, obj, str } from "./decode";
import type { components } from "./schema";

type S = components["schemas"];

export interface Matcher {
  label: string;
  op: "=" | "!=" | "=~" | "!~";
  value: string;
}

export interface SilenceVM {
  id: string;
  ruleIds: string[];
  matchers: Matcher[];
  startsMs: number;
  endsMs: number;
  createdBy: string;
  comment: string;
  state: "pending" | "active" | "expired";
}

export function toMatchers(v: unknown): Matcher[] {
  return arr(v).map((m) => {
    const o = obj(m);
    const op = str(o.op, "=");
    return { label: str(o.label ?? o.name), op: op === "!=" || op === "=~" || op === "!~" ? op : "=", value: str(o.value) };
  });
}

function toSilence(v: unknown): SilenceVM {
  const s = obj(v);
  const ends = ms(s.ends_at) ?? 0;
  return {
    id: str(s.id),
    ruleIds: arr(s.rule_ids).map((x) => str(x)),
    matchers: toMatchers(s.matchers),
    startsMs: ms(s.starts_at) ?? 0,
    endsMs: ends,
    createdBy: str(s.created_by),
    comment: str(s.comment),
    state: s.state === "pending" || s.state === "expired" ? s.state : s.state === "active" || ends > Date.now() ? "active" : "expired",
  };
}

export async function listSilences(signal?: AbortSignal): Promise<SilenceVM[]> {
  return arr(unwrap(await client.GET("/api/v1/silences", { signal }))).map(toSilence);
}

export async function createSilence(body: S["SilenceCreate"]): Promise<SilenceVM> {
  return toSilence(unwrap(await client.POST("/api/v1/silences", { body })));
}

export async function expireSilence(id: string): Promise<void> {
  unwrap(await client.DELETE("/api/v1/silences/{silence_id}", { params: { path: { silence_id: id } } }));
}

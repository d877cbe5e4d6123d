// The org's own settings (mesh probing, retention) and its storage targets, over the generated
// client; used with TanStack Query.
import { api, unwrap } from "./http";
import type { components } from "./schema";

type S = components["schemas"];
export type Org = S["OrgPublic"];
export type OrgUpdate = S["OrgUpdate"];
export type MeshSettings = S["MeshSettings"];
export type StorageTarget = S["StorageTargetPublic"];
export type StorageTargetCreate = S["StorageTargetCreate"];
export type StorageTargetUpdate = S["StorageTargetUpdate"];
export type StorageProvider = StorageTargetCreate["provider"];

export async function getOrg(signal?: AbortSignal): Promise<Org> {
  return unwrap(await api.GET("/api/v1/org", { signal }));
}

export async function updateOrg(body: OrgUpdate): Promise<Org> {
  return unwrap(await api.PATCH("/api/v1/org", { body }));
}

export async function listStorageTargets(signal?: AbortSignal): Promise<StorageTarget[]> {
  return unwrap(await api.GET("/api/v1/storage-targets", { signal }));
}

export async function createStorageTarget(body: StorageTargetCreate): Promise<StorageTarget> {
  return unwrap(await api.POST("/api/v1/storage-targets", { body }));
}

export async function updateStorageTarget(id: string, body: StorageTargetUpdate): Promise<StorageTarget> {
  return unwrap(await api.PATCH("/api/v1/storage-targets/{target_id}", { params: { path: { target_id: id } }, body }));
}

export async function deleteStorageTarget(id: string): Promise<void> {
  const r = await api.DELETE("/api/v1/storage-targets/{target_id}", { params: { path: { target_id: id } } });
  unwrap(r);
}


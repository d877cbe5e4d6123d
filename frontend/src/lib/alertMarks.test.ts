import { describe, expect, it } from "vitest";
import { toAlert } from "../api/alerts";
import type { AgentVM } from "../api/models";
import { alert } from "../test/fixtures";
import { idsFor } from "../api/agents";
import { alertsOnPair, firingCells, withCustomRange } from "./alertMarks";
import { keyAt, keyLabel } from "./zones";

const agent = (id: string, name: string, region: string, zone: string): AgentVM => ({
  id,
  name,
  status: "online",
  last_seen_ms: null,
  version: null,
  provider: "aws",
  region,
  zone,
  subnet: null,
  mesh_address: null,
  metadata: {},
});
const FLEET = [agent("a1", "aws-use1-a-1", "us-east-1", "us-east-1a"), agent("a2", "aws-euw1-a-1", "eu-west-1", "eu-west-1a"), agent("a3", "aws-euw1-b-1", "eu-west-1", "eu-west-1b")];

describe("firingCells", () => {
  it("marks the cell of each firing series at the heatmap's level", () => {
    const a = toAlert(alert());
    expect([...firingCells([a], FLEET, "node").keys()]).toEqual(["aws-use1-a-1|aws-euw1-a-1"]);
    expect([...firingCells([a], FLEET, "zone").keys()]).toEqual(["aws/us-east-1/us-east-1a|aws/eu-west-1/eu-west-1a"]);
    expect([...firingCells([a], FLEET, "region").keys()]).toEqual(["us-east-1|eu-west-1"]);
  });

  it("lists an alert once per cell even when several of its series fall in it, and skips resolved ones", () => {
    const series = [
      { key: "a1|a2", src: { id: "a1", name: "aws-use1-a-1" }, dst: { id: "a2", name: "aws-euw1-a-1" } },
      { key: "a1|a3", src: { id: "a1", name: "aws-use1-a-1" }, dst: { id: "a3", name: "aws-euw1-b-1" } },
    ];
    const two = alert({ series, evidence: { ...alert().evidence, series } });
    const cells = firingCells([toAlert(two), toAlert(alert({ id: "old", state: "resolved" }))], FLEET, "region");
    expect(cells.get("us-east-1|eu-west-1")?.map((x) => x.id)).toEqual(["al1"]);
    expect(firingCells([toAlert(two)], FLEET, "zone").size).toBe(2);
  });
});

describe("alertsOnPair", () => {
  it("finds alerts by the pair's keys, whether names at a level or agent ids from a dashboard link", () => {
    const a = toAlert(alert());
    expect(alertsOnPair([a], FLEET, "region", "us-east-1", "eu-west-1")).toHaveLength(1);
    expect(alertsOnPair([a], FLEET, "node", "a1", "a2")).toHaveLength(1);
    expect(alertsOnPair([a], FLEET, "node", "aws-use1-a-1", "aws-euw1-a-1")).toHaveLength(1);
    expect(alertsOnPair([a], FLEET, "region", "eu-west-1", "us-east-1")).toHaveLength(0);
    expect(alertsOnPair([a], FLEET, "zone", "aws/us-east-1/us-east-1a", "aws/eu-west-1/eu-west-1b")).toHaveLength(0);
    expect(alertsOnPair([a], FLEET, "zone", "aws/us-east-1/us-east-1a", "aws/eu-west-1/eu-west-1a")).toHaveLength(1);
  });
});

describe("zone keys", () => {
  it("keep same-named zones of different regions or providers apart, and read as a person would", () => {
    const w = { ...agent("w", "w", "westeurope", "1"), provider: "azure" };
    const e = { ...agent("e", "e", "eastus", "1"), provider: "azure" };
    expect(keyAt(w, "zone")).not.toEqual(keyAt(e, "zone"));
    expect(idsFor([w, e], "zone", keyAt(w, "zone"))).toEqual(["w"]);
    expect(keyLabel("azure/westeurope/1", "zone")).toBe("azure westeurope 1");
    expect(keyLabel("aws/eu-west-1/eu-west-1a", "zone")).toBe("aws eu-west-1a");
    expect(keyLabel("eu-west-1", "region")).toBe("eu-west-1");
  });
});

describe("withCustomRange", () => {
  it("makes the picker use the alert's from/to", () => {
    expect(withCustomRange("/pair?src=a1&dst=a2&from=2026-11-23T17:50:00Z&to=2026-11-23T18:12:00Z")).toBe("/pair?src=a1&dst=a2&from=2026-11-23T17%3A50%3A00Z&to=2026-11-23T18%3A12%3A00Z&range=custom");
    expect(withCustomRange("/pair?src=a1&dst=a2")).toBe("/pair?src=a1&dst=a2");
  });
});

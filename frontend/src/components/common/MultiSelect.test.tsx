// @vitest-environment jsdom
import { cleanup, render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState } from "react";
import { afterEach, describe, expect, it } from "vitest";
import { Field } from "./Field";
import { MultiSelect } from "./MultiSelect";

const REGIONS = ["ap-northeast-2", "eu-central-1", "eu-west-1", "us-east-1"].map((r) => ({ value: r, label: r }));

function Harness({ start = [] as string[], seen }: { start?: string[]; seen: string[][] }) {
  const [value, setValue] = useState(start);
  return (
    <Field label="Regions" id="regions">
      {(a) => (
        <MultiSelect
          a11y={a}
          label="Regions"
          options={REGIONS}
          value={value}
          onChange={(next) => {
            seen.push(next);
            setValue(next);
          }}
        />
      )}
    </Field>
  );
}

const chips = () => within(screen.getByRole("list", { name: "Regions: selected" })).getAllByRole("listitem").map((c) => c.firstChild?.textContent);

afterEach(cleanup);

describe("MultiSelect", () => {
  it("filters as one types, adds with Enter and keeps the list open for the next pick", async () => {
    const seen: string[][] = [];
    const user = userEvent.setup({ delay: null });
    render(<Harness seen={seen} />);
    const input = screen.getByRole("combobox", { name: "Regions" });
    await user.type(input, "eu");
    const list = screen.getByRole("listbox", { name: "Regions" });
    expect(within(list).getAllByRole("option").map((o) => o.textContent)).toEqual(["eu-central-1", "eu-west-1"]);
    await user.keyboard("{ArrowDown}{ArrowDown}{Enter}");
    expect(seen.at(-1)).toEqual(["eu-west-1"]);
    expect(chips()).toEqual(["eu-west-1"]);
    expect((input as HTMLInputElement).value).toBe("");
    // The picked one leaves the list; the others stay offered.
    expect(within(list).getAllByRole("option").map((o) => o.textContent)).toEqual(["ap-northeast-2", "eu-central-1", "us-east-1"]);
    await user.click(within(list).getByRole("option", { name: "us-east-1" }));
    expect(seen.at(-1)).toEqual(["eu-west-1", "us-east-1"]);
    // Tabbing away with an option highlighted adds nothing.
    await user.tab();
    expect(seen).toHaveLength(2);
    expect(chips()).toEqual(["eu-west-1", "us-east-1"]);
  });

  it("says when nothing matches rather than showing an empty list", async () => {
    const user = userEvent.setup({ delay: null });
    render(<Harness seen={[]} />);
    await user.type(screen.getByRole("combobox", { name: "Regions" }), "mars");
    expect(screen.getByText("No regions match “mars”")).toBeTruthy();
    expect(within(screen.getByRole("listbox", { name: "Regions" })).queryAllByRole("option")).toHaveLength(0);
  });

  it("removes a chip with its button and the last one with Backspace in an empty input", async () => {
    const seen: string[][] = [];
    const user = userEvent.setup({ delay: null });
    render(<Harness start={["eu-west-1", "us-east-1", "gone-1"]} seen={seen} />);
    // A value the options no longer hold still shows, so it can be removed.
    expect(chips()).toEqual(["eu-west-1", "us-east-1", "gone-1"]);
    await user.click(screen.getByRole("button", { name: "Remove us-east-1" }));
    expect(seen.at(-1)).toEqual(["eu-west-1", "gone-1"]);
    await user.click(screen.getByRole("combobox", { name: "Regions" }));
    await user.keyboard("{Backspace}");
    expect(seen.at(-1)).toEqual(["eu-west-1"]);
    expect(chips()).toEqual(["eu-west-1"]);
  });
});

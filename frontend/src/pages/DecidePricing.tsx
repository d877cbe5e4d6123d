import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { clearPrice, getPricing, setPrice, type PriceItem } from "../api/advisors";
import { DecidePage } from "../components/decide/Layout";
import { usd } from "../components/decide/Terms";
import { Card, ErrorState, Loading } from "../components/common/State";
import { AdminOnly } from "../components/common/AdminOnly";
import { useIsAdmin } from "../lib/role";

export default function DecidePricing() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const catalog = useQuery({ queryKey: ["pricing"], queryFn: ({ signal }) => getPricing(signal) });
  const [provider, setProvider] = useState("aws");
  const [region, setRegion] = useState("us-east-1");
  const [item, setItem] = useState<PriceItem>("egress_internet_per_gb");
  const [price, setPriceText] = useState("");
  const [source, setSource] = useState("");
  const [filter, setFilter] = useState("");
  const refresh = () => qc.invalidateQueries({ queryKey: ["pricing"] });
  const save = useMutation({ mutationFn: () => setPrice(provider, region, item, Number(price), source), onSuccess: refresh });
  const revert = useMutation({ mutationFn: (f: { provider: string; region: string; item: PriceItem }) => clearPrice(f.provider, f.region, f.item), onSuccess: refresh });

  function submit(e: FormEvent) {
    e.preventDefault();
    save.mutate();
  }
  const data = catalog.data;
  const rows = (data?.figures ?? []).filter((f) => !filter || `${f.provider}/${f.region}`.includes(filter));
  const error = save.error ?? revert.error;
  return (
    <DecidePage title="prices" current="/decide/pricing">
      {catalog.isPending && <Loading />}
      {catalog.error && <ErrorState error={catalog.error} onRetry={() => void catalog.refetch()} />}
      {data && (
        <>
          <Card title="Your price" note="overrides the shipped figure; kept when the shipped catalog changes">
            <AdminOnly what="Setting a price">
            <form className="field-row" onSubmit={submit} aria-label="Set a price">
              <label>
                Provider
                <input required value={provider} onChange={(e) => setProvider(e.target.value)} />
              </label>
              <label>
                Region
                <input required value={region} onChange={(e) => setRegion(e.target.value)} />
              </label>
              <label>
                Item
                <select value={item} onChange={(e) => setItem(e.target.value as PriceItem)}>
                  {Object.keys(data.items).map((i) => (
                    <option key={i}>{i}</option>
                  ))}
                </select>
              </label>
              <label>
                Price (USD)
                <input required type="number" step="any" value={price} onChange={(e) => setPriceText(e.target.value)} />
              </label>
              <label>
                Source
                <input required value={source} onChange={(e) => setSource(e.target.value)} placeholder="our contract, 2026-10" />
              </label>
              <button type="submit" className="primary" disabled={save.isPending}>
                Save price
              </button>
            </form>
            </AdminOnly>
            {error && (
              <p className="state error" role="alert">
                {error.message}
              </p>
            )}
          </Card>
          <Card title="Pricing catalog" note={`shipped figures as listed on ${data.catalog_date}`}>
            <p className="muted">{data.note}</p>
            <label className="field-row">
              Filter provider/region <input value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="aws/us-east-1" />
            </label>
            <table className="data" aria-label="Prices">
              <thead>
                <tr>
                  <th>provider</th>
                  <th>region</th>
                  <th>item</th>
                  <th>price</th>
                  <th>effective</th>
                  <th>source</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {rows.map((f) => (
                  <tr key={`${f.provider}/${f.region}/${f.item}`}>
                    <td>{f.provider}</td>
                    <td>{f.region}</td>
                    <td title={data.items[f.item]}>{f.item}</td>
                    <td>
                      {usd(f.price_usd)}
                      {f.origin === "org" && <span className="badge ok"> yours (shipped {usd(f.shipped_price_usd)})</span>}
                    </td>
                    <td>{f.effective_date}</td>
                    <td>{f.source}</td>
                    <td>
                      {f.origin === "org" && admin && (
                        <button type="button" aria-label={`Revert ${f.provider} ${f.region} ${f.item} to the shipped price`} onClick={() => revert.mutate(f)}>
                          Revert
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </Card>
        </>
      )}
    </DecidePage>
  );
}

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState, type FormEvent } from "react";
import { deleteOtlpExport, getOtlpExport, parseHeaders, saveOtlpExport, testOtlpExport, type OtlpExportIn } from "../../api/export";
import { fieldErrors } from "../../api/http";
import { useVocabularies } from "../../api/vocabularies";
import { formatInstant } from "../../lib/format";
import { useIsAdmin } from "../../lib/role";
import { Field, FormError } from "../common/Field";
import { Card, ErrorState, Loading } from "../common/State";

const FIELDS = ["endpoint_url", "headers", "level", "kinds", "interval_s"];
type Kind = NonNullable<OtlpExportIn["kinds"]>[number];
type Level = OtlpExportIn["level"];

/** The org's OTLP/HTTP push to its OpenTelemetry collector: admins set it up and try it;
 * header values (a collector's key) are write-only. */
export function OtlpExport() {
  const admin = useIsAdmin();
  const qc = useQueryClient();
  const vocab = useVocabularies().data;
  const current = useQuery({ queryKey: ["otlp-export"], queryFn: ({ signal }) => getOtlpExport(signal) });
  const [url, setUrl] = useState("");
  const [headers, setHeaders] = useState("");
  const [clearHeaders, setClearHeaders] = useState(false);
  const [level, setLevel] = useState("region");
  const [kinds, setKinds] = useState<string[]>([]);
  const [intervalS, setIntervalS] = useState("60");
  const [enabled, setEnabled] = useState(true);
  const [headerError, setHeaderError] = useState<string>();
  useEffect(() => {
    const c = current.data;
    if (c) {
      setUrl(c.endpoint_url);
      setLevel(c.level);
      setKinds(c.kinds);
      setIntervalS(String(c.interval_s));
      setEnabled(c.enabled);
    } else if (c === null && vocab) {
      setKinds(vocab.export_kinds);
    }
  }, [current.data, vocab]);
  const refresh = (saved?: unknown) => {
    if (saved !== undefined) qc.setQueryData(["otlp-export"], saved);
    else void qc.invalidateQueries({ queryKey: ["otlp-export"] });
  };
  const save = useMutation({
    mutationFn: (body: OtlpExportIn) => saveOtlpExport(body),
    onSuccess: (saved) => {
      setHeaders("");
      setClearHeaders(false);
      refresh(saved);
    },
  });
  const push = useMutation({ mutationFn: () => testOtlpExport(), onSettled: () => refresh() });
  const remove = useMutation({ mutationFn: () => deleteOtlpExport(), onSuccess: () => qc.setQueryData(["otlp-export"], null) });
  const errs = fieldErrors(save.error);

  if (current.isPending) return <Loading what="OpenTelemetry export" />;
  if (current.isError) return <ErrorState error={current.error} onRetry={() => void current.refetch()} />;
  const c = current.data;
  const status = c && (
    <div aria-label="OpenTelemetry export status" role="group">
      <p>
        {c.enabled ? "Pushing to " : "Paused; set to push to "}
        <code style={{ overflowWrap: "anywhere" }}>{c.endpoint_url}</code>
      </p>
      <dl className="kv">
        <div>
          <dt>last push that arrived</dt>
          <dd>{c.last_success_at ? formatInstant(c.last_success_at, "second") : "none yet"}</dd>
        </div>
        {c.last_error && (
          <div>
            <dt>last failure</dt>
            <dd>
              {c.last_error} ({c.failures_in_a_row} in a row)
            </dd>
          </div>
        )}
        {c.last_data_points !== null && (
          <div>
            <dt>data points in the last push</dt>
            <dd>{c.last_data_points}</dd>
          </div>
        )}
      </dl>
    </div>
  );

  if (!admin) {
    return (
      <Card title="OpenTelemetry export" note="OTLP/HTTP push of the measured distributions">
        {status ?? <p className="muted">No OpenTelemetry collector is set up.</p>}
      </Card>
    );
  }

  function submit(e: FormEvent) {
    e.preventDefault();
    setHeaderError(undefined);
    let given: Record<string, string> | null = null;
    if (clearHeaders) given = {};
    else if (headers.trim()) {
      const parsed = parseHeaders(headers);
      if (typeof parsed === "string") {
        setHeaderError(parsed);
        return;
      }
      given = parsed;
    }
    save.mutate({ endpoint_url: url.trim(), level: level as Level, kinds: kinds as Kind[], interval_s: Number(intervalS), enabled, ...(given ? { headers: given } : {}) });
  }

  const stored = c?.header_names ?? [];
  return (
    <Card title="OpenTelemetry export" note="OTLP/HTTP push of the measured distributions to your collector, as exponential histograms">
      {status}
      <form aria-label="OpenTelemetry export settings" onSubmit={submit}>
        <Field id="otlp-url" label="Collector URL (a URL without a path gets /v1/metrics)" error={errs.endpoint_url}>
          {(a) => <input {...a} type="url" required value={url} onChange={(e) => setUrl(e.target.value)} placeholder="https://otel-collector.example.com:4318" />}
        </Field>
        <Field id="otlp-headers" label={stored.length ? `Headers (stored: ${stored.join(", ")}; type to replace)` : "Headers, one Name: value per line (write-only)"} error={headerError ?? errs.headers}>
          {(a) => <textarea {...a} rows={2} autoComplete="off" value={headers} onChange={(e) => setHeaders(e.target.value)} placeholder="x-api-key: …" />}
        </Field>
        {stored.length > 0 && (
          <label>
            <input type="checkbox" checked={clearHeaders} onChange={(e) => setClearHeaders(e.target.checked)} /> Remove the stored headers
          </label>
        )}
        <Field id="otlp-level" label="Series" error={errs.level}>
          {(a) => (
            <select {...a} value={level} onChange={(e) => setLevel(e.target.value)}>
              {(vocab?.export_levels ?? [level]).map((l) => (
                <option key={l} value={l}>
                  {l === "pair" ? "per agent pair" : l === "region" ? "per region pair" : l}
                </option>
              ))}
            </select>
          )}
        </Field>
        <fieldset aria-invalid={errs.kinds ? true : undefined}>
          <legend>Measurements</legend>
          {(vocab?.export_kinds ?? []).map((k) => (
            <label key={k}>
              <input type="checkbox" checked={kinds.includes(k)} onChange={(e) => setKinds(e.target.checked ? [...kinds, k] : kinds.filter((x) => x !== k))} /> {k}
            </label>
          ))}
          {errs.kinds && (
            <span className="field-error" role="alert">
              {errs.kinds}
            </span>
          )}
        </fieldset>
        <Field id="otlp-interval" label="Push every (seconds)" error={errs.interval_s}>
          {(a) => <input {...a} type="number" min={10} max={3600} required value={intervalS} onChange={(e) => setIntervalS(e.target.value)} />}
        </Field>
        <label>
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.target.checked)} /> Push
        </label>
        <FormError error={save.error} shown={Object.keys(errs).filter((k) => FIELDS.includes(k.split(".")[0] ?? ""))} />
        {save.isSuccess && <p role="status">OpenTelemetry export saved.</p>}
        <div className="field-row">
          <button type="submit" className="primary" disabled={save.isPending}>
            Save OpenTelemetry export
          </button>
          {c && (
            <button type="button" disabled={push.isPending} onClick={() => push.mutate()}>
              Push now
            </button>
          )}
          {c && (
            <button
              type="button"
              className="danger"
              onClick={() => {
                if (window.confirm("Stop pushing to this collector?")) remove.mutate();
              }}
            >
              Stop the export
            </button>
          )}
        </div>
      </form>
      {push.data && (
        <p role="status" className={push.data.ok ? "" : "state error"}>
          {push.data.ok ? `The collector took ${push.data.data_points} data points (${push.data.detail}).` : `The push failed: ${push.data.detail}${push.data.transient ? " (may succeed later)" : ""}.`}
        </p>
      )}
      {(push.error ?? remove.error) && (
        <p className="state error" role="alert">
          {(push.error ?? remove.error)?.message}
        </p>
      )}
    </Card>
  );
}

import { useQuery } from "@tanstack/react-query";
import { getRule } from "../api/alertRules";
import { RuleEditor } from "../components/alerts/RuleEditor";
import { follow } from "../components/common/Link";
import { ErrorState, Loading } from "../components/common/State";
import { linkTo, navigate, useParams } from "../lib/router";

/** Create a rule, or edit the one named by ?id=. */
export default function AlertRule() {
  const [params] = useParams();
  const id = params.get("id");
  const rule = useQuery({ queryKey: ["alert-rule", id], queryFn: ({ signal }) => getRule(id!, signal), enabled: Boolean(id) });
  const back = () => navigate(linkTo("/alerts", { tab: "rules" }));
  return (
    <>
      <div className="page-head">
        <h1>{id ? `Edit rule${rule.data ? ` ${rule.data.name}` : ""}` : "New alert rule"}</h1>
        <a href={linkTo("/alerts", { tab: "rules" })} onClick={follow}>
          ← Rules
        </a>
      </div>
      {id && rule.error && <ErrorState error={rule.error} onRetry={() => void rule.refetch()} />}
      {id && !rule.data && !rule.error && <Loading />}
      {(!id || rule.data) && <RuleEditor key={id ?? "new"} rule={rule.data} onSaved={back} onCancel={back} />}
    </>
  );
}

import { useQuery } from "@tanstack/react-query";
import { getHealth, problems } from "../../api/health";

/** For admins: a banner naming each part of the service that is down or failing (a job that
 * failed its last runs, with its reason), checked every minute. */
export function HealthBanner() {
  const health = useQuery({ queryKey: ["health"], queryFn: ({ signal }) => getHealth(signal), refetchInterval: 60_000, staleTime: 30_000 });
  const list = health.data ? problems(health.data) : [];
  if (list.length === 0) return null;
  return (
    // A region, not an alert: it stays while the cause lasts, and must not be taken for a
    // form's refusal by people or tools looking for the page's alert.
    <section className="banner bad" aria-label="Service health">
      <strong>Stormwatch is degraded</strong> — alerts or data may be late until this is fixed:
      <ul>
        {list.map((p) => (
          <li key={p}>{p}</li>
        ))}
      </ul>
    </section>
  );
}

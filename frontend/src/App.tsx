import { Suspense, lazy, useEffect, useState } from "react";
import { follow } from "./components/common/Link";
import { onUnauthorized } from "./api/http";
import { getMe, logout, type Me } from "./api/session";
import { HealthBanner } from "./components/common/HealthBanner";
import { Loading, ErrorState } from "./components/common/State";
import { NAV } from "./nav";
import { linkTo, navigate, useLocation } from "./lib/router";
import { useTheme } from "./lib/theme";
import { Login } from "./pages/Login";
import { AcceptInvite, ForgotPassword, ResetPassword } from "./pages/AccountLinks";

// Pages load on demand: the charts library only arrives with the first chart page.
const loadOverview = () => import("./pages/Overview");
// The overview is the landing page: fetch its code while the session is being checked.
if (window.location.pathname === "/" || window.location.pathname === "/overview") void loadOverview();
const Overview = lazy(loadOverview);
const Pair = lazy(() => import("./pages/Pair"));
const Distributions = lazy(() => import("./pages/Distributions"));
const Storage = lazy(() => import("./pages/Storage"));
const Throughput = lazy(() => import("./pages/Throughput"));
const Fleet = lazy(() => import("./pages/Fleet"));
const Settings = lazy(() => import("./pages/Settings"));
const DecideCompression = lazy(() => import("./pages/DecideCompression"));
const DecideReplication = lazy(() => import("./pages/DecideReplication"));
const DecidePlacement = lazy(() => import("./pages/DecidePlacement"));
const DecideTimeouts = lazy(() => import("./pages/DecideTimeouts"));
const DecideRankings = lazy(() => import("./pages/DecideRankings"));
const DecidePricing = lazy(() => import("./pages/DecidePricing"));
const Alerts = lazy(() => import("./pages/Alerts"));
const AlertRule = lazy(() => import("./pages/AlertRule"));

function Page({ path }: { path: string }) {
  switch (path) {
    case "/overview":
      return <Overview />;
    case "/pair":
      return <Pair />;
    case "/distributions":
      return <Distributions />;
    case "/storage":
      return <Storage />;
    case "/throughput":
      return <Throughput />;
    case "/fleet":
      return <Fleet />;
    case "/settings":
      return <Settings />;
    case "/decide":
    case "/decide/compression":
      return <DecideCompression />;
    case "/decide/replication":
      return <DecideReplication />;
    case "/decide/placement":
      return <DecidePlacement />;
    case "/decide/timeouts":
      return <DecideTimeouts />;
    case "/decide/rankings":
      return <DecideRankings />;
    case "/decide/pricing":
      return <DecidePricing />;
    case "/alerts":
      return <Alerts />;
    case "/alerts/rule":
      return <AlertRule />;
    default:
      return (
        <div className="state">
          <h1>Not found</h1>
          <p>
            <a href="/overview" onClick={follow}>
              Go to the overview
            </a>
          </p>
        </div>
      );
  }
}

type Auth = { state: "checking" } | { state: "out" } | { state: "in"; me: Me } | { state: "error"; error: Error };

export function App() {
  const { path } = useLocation();
  const { theme, toggle } = useTheme();
  const [auth, setAuth] = useState<Auth>({ state: "checking" });

  useEffect(() => {
    let live = true;
    getMe()
      .then((me) => live && setAuth(me ? { state: "in", me } : { state: "out" }))
      .catch((e: Error) => live && setAuth({ state: "error", error: e }));
    const off = onUnauthorized(() => setAuth({ state: "out" }));
    return () => {
      live = false;
      off();
    };
  }, []);

  useEffect(() => {
    if (path === "/" || path === "") navigate(`/overview${window.location.search}`, { replace: true });
  }, [path]);

  const signedIn = (me: Me) => {
    setAuth({ state: "in", me });
    navigate("/overview", { replace: true }); // replaces the link's address, token and all
  };
  // The pages of mailed links and of a forgotten password work signed in or not.
  if (path === "/accept-invite") return <AcceptInvite onDone={signedIn} />;
  if (path === "/reset-password") return <ResetPassword onDone={signedIn} />;
  if (path === "/forgot-password" && auth.state !== "in") return <ForgotPassword />;
  if (auth.state === "checking") return <Loading what="Starting" />;
  if (auth.state === "error") return <ErrorState error={auth.error} onRetry={() => window.location.reload()} />;
  if (auth.state === "out") {
    return (
      <Login
        onLoggedIn={(me) => {
          setAuth({ state: "in", me });
          if (path === "/login" || path === "/") navigate("/overview", { replace: true });
        }}
      />
    );
  }

  const current = path === "/pair" ? "/overview" : path.startsWith("/decide") ? "/decide" : path === "/alerts/rule" ? "/alerts" : path;
  return (
    <div className="shell">
      <a className="skip" href="#main">
        Skip to content
      </a>
      <aside className="side">
        <div className="brand">
          <svg width="22" height="22" viewBox="0 0 24 24" aria-hidden="true">
            <path d="M3 14h4l3-8 4 14 3-6h4" fill="none" stroke="currentColor" strokeWidth="2" />
          </svg>
          Stormwatch
        </div>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.path}>
                <a href={linkTo(n.path)} onClick={follow} aria-current={current === n.path ? "page" : undefined}>
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div className="foot">
          <span title={auth.me.email}>{auth.me.email}</span>
          {auth.me.org_name && <span>{auth.me.org_name}</span>}
          <button type="button" onClick={toggle} aria-label={`Switch to ${theme === "dark" ? "light" : "dark"} theme`}>
            {theme === "dark" ? "Light theme" : "Dark theme"}
          </button>
          <button
            type="button"
            onClick={() => {
              void logout().finally(() => setAuth({ state: "out" }));
            }}
          >
            Log out
          </button>
        </div>
      </aside>
      <main id="main">
        {auth.me.role === "admin" && <HealthBanner />}
        <Suspense fallback={<Loading />}>
          <Page path={path === "/login" ? "/overview" : path} />
        </Suspense>
      </main>
    </div>
  );
}

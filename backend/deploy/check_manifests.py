"""Checks rendered Kubernetes manifests for what docs/kubernetes.md promises.

Usage: check_manifests.py chart <rendered.yaml> <fullname> <mode>   (mode: bundled | external)
       check_manifests.py agents <dir>
       check_manifests.py self-test <rendered.yaml> <fullname> <agents dir>

Each check names the object and what is wrong; any problem exits 1. `self-test` breaks a
copy of good manifests in each way a check guards against and fails unless every break is
caught: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import copy
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

Doc = dict[str, Any]
WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


def load(path: Path) -> list[Doc]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def name(d: Doc) -> str:
    return f"{d['kind']}/{d['metadata']['name']}"


def pod(d: Doc) -> Doc:
    spec: Doc = d["spec"]["template"]["spec"]
    return spec


def containers(d: Doc) -> Iterator[tuple[str, Doc]]:
    for kind in ("initContainers", "containers"):
        for c in pod(d).get(kind) or []:
            yield kind, c


def env(c: Doc) -> dict[str, Doc]:
    return {e["name"]: e for e in c.get("env") or []}


def find(docs: list[Doc], kind: str, suffix: str) -> Doc | None:
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"].endswith(suffix):
            return d
    return None


def check_security(docs: list[Doc], problems: list[str],
                   root_init: Callable[[Doc, Doc], bool] = lambda d, c: False) -> None:
    """Every pod runs as non-root with a seccomp profile; every container drops every
    capability, cannot escalate and has a read-only root (root_init: the containers allowed
    to run as root, with only the capabilities they name)."""
    for d in docs:
        if d["kind"] not in WORKLOADS:
            continue
        ps = pod(d).get("securityContext") or {}
        if ps.get("runAsNonRoot") is not True or ps.get("runAsUser") == 0:
            problems.append(f"{name(d)}: the pod is not runAsNonRoot")
        if (ps.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
            problems.append(f"{name(d)}: no RuntimeDefault seccomp profile")
        for _, c in containers(d):
            sc = c.get("securityContext") or {}
            where = f"{name(d)} container {c['name']}"
            if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
                problems.append(f"{where}: does not drop ALL capabilities")
            if sc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}: allowPrivilegeEscalation is not false")
            if sc.get("readOnlyRootFilesystem") is not True:
                problems.append(f"{where}: the root filesystem is writable")
            as_root = sc.get("runAsNonRoot") is False or sc.get("runAsUser") == 0
            if as_root and not root_init(d, c):
                problems.append(f"{where}: runs as root")


def check_chart(docs: list[Doc], full: str, mode: str) -> list[str]:
    problems: list[str] = []
    check_security(docs, problems)
    beat = find(docs, "Deployment", "-beat")
    if beat is None:
        problems.append("no beat Deployment")
    else:
        if beat["spec"].get("replicas") != 1:
            problems.append(f"{name(beat)}: replicas {beat['spec'].get('replicas')}, not 1")
        if (beat["spec"].get("strategy") or {}).get("type") != "Recreate":
            problems.append(f"{name(beat)}: not the Recreate strategy (two beats at once)")
    job = find(docs, "Job", "-migrate")
    if job is None:
        problems.append("no migration Job")
    else:
        annotations = job["metadata"].get("annotations") or {}
        hooks = set(str(annotations.get("helm.sh/hook", "")).split(","))
        if not {"post-install", "pre-upgrade"} <= hooks:
            problems.append(f"{name(job)}: hooks {sorted(hooks)}, not post-install and pre-upgrade")
        cmd = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
        migrate = "alembic -c migrations/alembic.ini upgrade heads"
        if migrate not in cmd or "create-admin" not in cmd:
            problems.append(f"{name(job)}: does not migrate and create the admin: {cmd}")
    api = find(docs, "Deployment", "-api")
    if api is None:
        problems.append("no API Deployment")
    else:
        c = pod(api)["containers"][0]
        ready = (c.get("readinessProbe") or {}).get("httpGet") or {}
        if ready.get("path") != "/docs":
            problems.append(f"{name(api)}: readiness probe {ready}, not GET /docs")
        if "tcpSocket" not in (c.get("livenessProbe") or {}):
            problems.append(f"{name(api)}: liveness is not the open port")
    secrets = [d for d in docs if d["kind"] == "Secret"]
    secret_name = secrets[0]["metadata"]["name"] if secrets else None
    for d in docs:
        if d["kind"] not in WORKLOADS or d["metadata"]["name"].endswith(("-redis",)):
            continue
        for _, c in containers(d):
            e = env(c)
            if "SECRET_KEY" not in e and "POSTGRES_PASSWORD" not in e:
                continue
            for key in ("SECRET_KEY", "POSTGRES_PASSWORD", "DATABASE_URL", "REDIS_URL"):
                ref = ((e.get(key) or {}).get("valueFrom") or {}).get("secretKeyRef")
                literal = (e.get(key) or {}).get("value")
                if key in ("SECRET_KEY", "POSTGRES_PASSWORD") and key in e and not ref:
                    problems.append(f"{name(d)} {c['name']}: {key} is not from a Secret")
                if key in ("DATABASE_URL", "REDIS_URL") and mode == "external" and not ref:
                    problems.append(f"{name(d)} {c['name']}: {key} is not from a Secret")
                if literal and key == "DATABASE_URL" and "$(POSTGRES_PASSWORD)" not in literal:
                    problems.append(f"{name(d)} {c['name']}: DATABASE_URL holds a password")
                if ref and secret_name and ref["name"] != secret_name:
                    problems.append(f"{name(d)} {c['name']}: {key} from {ref['name']}, "
                                    f"not the chart's Secret {secret_name}")
    bundled_db = find(docs, "StatefulSet", "-postgresql")
    if mode == "bundled" and bundled_db is None:
        problems.append("no bundled database")
    if mode == "external" and (bundled_db or find(docs, "Deployment", "-redis")):
        problems.append("an external database and Redis, yet the bundled ones render")
    web = find(docs, "Deployment", "-web")
    if web is None:
        problems.append("no web Deployment")
    else:
        upstream = (env(pod(web)["containers"][0]).get("STORMWATCH_API_UPSTREAM") or {})
        want = f"{full}-api:8000"
        if upstream.get("value") != want:
            problems.append(f"{name(web)}: STORMWATCH_API_UPSTREAM {upstream}, not {want}")
        ports = [p["containerPort"] for p in pod(web)["containers"][0].get("ports", [])]
        if ports != [8080]:
            problems.append(f"{name(web)}: ports {ports}, not nginx's 8080")
    # Every Service reaches pods of some workload.
    labels = [d["spec"]["template"]["metadata"]["labels"] for d in docs if d["kind"] in WORKLOADS]
    for svc in (d for d in docs if d["kind"] == "Service"):
        sel = svc["spec"].get("selector") or {}
        if not any(all(lab.get(k) == v for k, v in sel.items()) for lab in labels):
            problems.append(f"{name(svc)}: its selector {sel} matches no pod")
    return problems


def _agent_root_init(d: Doc, c: Doc) -> bool:
    caps = set((c.get("securityContext") or {}).get("capabilities", {}).get("add") or [])
    return d["kind"] == "DaemonSet" and c["name"] == "state-dir" and caps <= {"CHOWN", "FOWNER"}


def check_agents(folder: Path) -> list[str]:
    problems: list[str] = []
    kust = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs: list[Doc] = []
    for f in kust["resources"]:
        if not (folder / f).is_file():
            problems.append(f"kustomization.yaml lists {f}, which is not there")
        else:
            docs += load(folder / f)
    docs += load(folder / "deployment.yaml")
    check_security(docs, problems, _agent_root_init)
    ds = find(docs, "DaemonSet", "stormwatch-agent")
    if ds is None:
        return [*problems, "no agent DaemonSet"]
    spec = pod(ds)
    if spec.get("hostNetwork") is not True:
        problems.append(f"{name(ds)}: not on the host's network")
    if spec.get("dnsPolicy") != "ClusterFirstWithHostNet":
        problems.append(f"{name(ds)}: dnsPolicy {spec.get('dnsPolicy')}")
    for d in (ds, find(docs, "Deployment", "stormwatch-agent-pods")):
        if d is None:
            problems.append("no agent Deployment")
            continue
        c = pod(d)["containers"][0]
        e = env(c)
        field = {k: ((v.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                 for k, v in e.items()}
        source = "NODE_NAME" if d is ds else "POD_NAME"
        want = "spec.nodeName" if d is ds else "metadata.name"
        named = (e.get("STORMWATCH_NAME") or {}).get("value")
        if field.get(source) != want or named != f"$({source})":
            problems.append(f"{name(d)}: the agent's name is not the {want}")
        if "STORMWATCH_ENROLLMENT_TOKEN" in e:
            problems.append(f"{name(d)}: the enrollment token is in the environment")
        token = (e.get("STORMWATCH_ENROLLMENT_TOKEN_FILE") or {}).get("value", "")
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod(d).get("volumes", [])}
        vol = volumes.get(mounts.get(str(Path(token).parent), ""), {})
        if "secret" not in vol:
            problems.append(f"{name(d)}: the enrollment token file is not from a Secret")
        if "/var/lib/stormwatch-agent" not in mounts:
            problems.append(f"{name(d)}: no volume for the agent's state")
    state = {v["name"]: v for v in pod(ds).get("volumes", [])}.get("state", {})
    if (state.get("hostPath") or {}).get("path") != "/var/lib/stormwatch-agent":
        problems.append(f"{name(ds)}: the agent's identity does not stay on the node")
    return problems


def self_test(rendered: Path, full: str, agents: Path) -> list[str]:
    """Breaks copies of good manifests; every break must be reported."""
    good = load(rendered)
    missed: list[str] = []
    if check_chart(good, full, "bundled"):
        return ["the good chart fails: " + "; ".join(check_chart(good, full, "bundled"))]

    def broken(what: str, change: Callable[[list[Doc]], None]) -> None:
        docs = copy.deepcopy(good)
        change(docs)
        if not check_chart(docs, full, "bundled"):
            missed.append(what)

    def beat(docs: list[Doc]) -> Doc:
        d = find(docs, "Deployment", "-beat")
        assert d is not None
        return d

    broken("beat replicas 2", lambda ds: beat(ds)["spec"].update(replicas=2))
    broken("beat RollingUpdate",
           lambda ds: beat(ds)["spec"].update(strategy={"type": "RollingUpdate"}))
    broken("a container keeping its capabilities", lambda ds: pod(beat(ds))["containers"][0][
        "securityContext"]["capabilities"].update(drop=[]))
    broken("a pod as root", lambda ds: pod(beat(ds))["securityContext"].update(runAsNonRoot=False))
    broken("a writable root", lambda ds: pod(beat(ds))["containers"][0]["securityContext"].update(
        readOnlyRootFilesystem=False))
    broken("the API ready without answering HTTP", lambda ds: pod(
        find(ds, "Deployment", "-api") or {})["containers"][0].update(
        readinessProbe={"tcpSocket": {"port": "http"}}))
    broken("the job without its upgrade hook", lambda ds: [d["metadata"]["annotations"].update(
        {"helm.sh/hook": "post-install"}) for d in ds if d["kind"] == "Job"])
    broken("SECRET_KEY as a literal", lambda ds: [e.update(value="x" * 32) or e.pop("valueFrom")
                                                  for d in ds if d["kind"] in WORKLOADS
                                                  for _, c in containers(d)
                                                  for e in c.get("env") or []
                                                  if e["name"] == "SECRET_KEY"])
    broken("a Service selecting nothing", lambda ds: [d["spec"]["selector"].update(
        {"app.kubernetes.io/component": "nothing"}) for d in ds if d["kind"] == "Service"][:1])
    broken("the web's upstream", lambda ds: pod(find(ds, "Deployment", "-web") or {})[
        "containers"][0]["env"][0].update(value="api:8000"))
    if check_agents(agents):
        return [*missed, "the good agent manifests fail: " + "; ".join(check_agents(agents))]
    for what, old, new in (
            ("the DaemonSet off the host network", "hostNetwork: true", "hostNetwork: false"),
            ("the agent named by its pod", "fieldPath: spec.nodeName", "fieldPath: metadata.name"),
            ("the token in the environment", "STORMWATCH_ENROLLMENT_TOKEN_FILE\n",
             "STORMWATCH_ENROLLMENT_TOKEN\n"),
            ("an agent as root", "runAsUser: 65532  #", "runAsUser: 0  #")):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(agents, tmp, dirs_exist_ok=True)
            ds = Path(tmp) / "daemonset.yaml"
            text = ds.read_text()
            assert old in text, old
            ds.write_text(text.replace(old, new))
            if not check_agents(Path(tmp)):
                missed.append(what)
    return [f"not caught: {m}" for m in missed]


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) > 1 else ""
    if what == "chart":
        problems = check_chart(load(Path(argv[2])), argv[3], argv[4])
    elif what == "agents":
        problems = check_agents(Path(argv[2]))
    elif what == "self-test":
        problems = self_test(Path(argv[2]), argv[3], Path(argv[4]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(f"  {p}", file=sys.stderr)
    print(f"{what}: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

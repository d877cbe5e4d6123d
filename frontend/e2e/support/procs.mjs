// The processes a test started, read from /proc: a process tree, and whether each process of
// it still runs (a pid is matched with its start time, so a reused pid is not taken for it).
import { readdirSync, readFileSync } from "node:fs";

/** A process by pid: { pid, ppid, start, state, argv } or null when there is none. */
export function proc(pid) {
  let stat;
  let argv;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return null;
  }
  // The command name in parentheses may hold spaces: the fields start after its last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pid, ppid: Number(fields[1]), start: fields[19], state: fields[0], argv };
}

/** Every descendant of `pid` running now (children, their children, ...). */
export function descendants(pid) {
  const all = readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map((d) => proc(Number(d))).filter(Boolean);
  const out = [];
  const parents = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        out.push(p);
        grew = true;
      }
    }
  }
  return out;
}

/** Whether `p` (from proc()) still runs: same pid and start time, and not exited (a zombie). */
export function running(p) {
  const now = proc(p.pid);
  return now !== null && now.start === p.start && now.state !== "Z";
}

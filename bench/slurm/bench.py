#!/usr/bin/env python3
"""Slurm half of the MCJS recovery benchmark (Python 3 standard library only).

Needs the cluster of start.sh (it re-enters the cluster's network namespace by
itself when started outside it). Two measurements, with the same job, the
checkpointing trainer of trainer.sh submitted with `sbatch --requeue`:

provision   submit -> running. Clock starts just before `sbatch` is called and
            stops at the first `squeue` poll that shows the job RUNNING. The job
            is then cancelled and the next one is submitted after a random
            0..--jitter s pause (so submits do not phase-lock to slurmctld's 1 s
            background loop). --provision samples.

recovery    node killed -> running again elsewhere. A fresh job is submitted,
            runs until it has written --warm-steps checkpoints, then its node
            "crashes": SIGKILL, at the same instant, to that node's slurmd, the
            job's slurmstepd and every process of the job. The clock starts just
            before the first kill and stops at the first `scontrol show job` poll
            that shows the job RUNNING on another node (Restarts >= 1). Slurm
            only notices through SlurmdTimeout (node NOT_RESPONDING, then DOWN),
            requeues the job, holds it cred_expire+1 s (BeginTime), then starts it
            again. Afterwards the run checks that the new instance resumed from the
            checkpoint (from_step equals the step checkpointed before the kill, not
            0), restarts the killed node's slurmd, waits until the node is IDLE
            again (ReturnToService=2), waits for one more checkpoint, and cancels
            the job. --kills runs.

Prints a markdown report (median, p99 with the nearest-rank method, min, max in
seconds) and, with --json, writes
  {"system": "slurm", "provision_s": [...], "recovery_s": [...], "config": {...}, ...}
which bench/compare.py reads.

  bash bench/slurm/ns.sh python3 bench/slurm/bench.py --quick
  bash bench/slurm/ns.sh python3 bench/slurm/bench.py --kills 50 --json out.json --md out.md
"""
import argparse
import collections
import datetime
import json
import math
import os
import platform
import random
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.environ.get("SLURM_BENCH", "/tmp/mcjs-slurm-bench")
CONF = os.path.join(BENCH, "etc", "slurm.conf")
NETNS = os.path.join(BENCH, "netns")
TRAINER = os.path.join(HERE, "trainer.sh")
MARK_JOB = "MCJS_SLURM_BENCH_JOB"
MARK_DAEMON = "MCJS_SLURM_BENCH_DAEMON"


def in_netns():
    try:
        return os.stat(NETNS).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def now():
    return time.time()


def sh(cmd, check=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} -> rc={p.returncode}: {p.stderr.strip()}")
    return p.stdout


def kv(text):
    d = {}
    for k, v in re.findall(r"(\w+)=(\S*)", text):
        d.setdefault(k, v)
    return d


def show_job(jid):
    return kv(sh(["scontrol", "show", "job", "-o", str(jid)], check=False))


def node_state(node):
    return kv(sh(["scontrol", "show", "node", "-o", node], check=False)).get("State", "")


def squeue_state(jid):
    return sh(["squeue", "-h", "-j", str(jid), "-o", "%T"], check=False).strip()


def queue_ids():
    return sh(["squeue", "-h", "-o", "%i"], check=False).split()


def nodes():
    return sh(["sinfo", "-h", "-N", "-o", "%N"]).split()


def read_proc(pid, what):
    try:
        with open(f"/proc/{pid}/{what}", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def pids():
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def slurmd_pid(node):
    """PID of this bench's slurmd for NODE, or None."""
    try:
        p = int(open(os.path.join(BENCH, "run", f"slurmd-{node}.pid")).read())
    except (OSError, ValueError):
        return None
    cmd = read_proc(p, "cmdline").split("\0")
    if cmd and cmd[0].endswith("slurmd") and node in cmd and CONF in cmd:
        return p
    return None


def start_slurmd(node):
    env = dict(os.environ, **{MARK_DAEMON: BENCH})
    subprocess.run(["slurmd", "-f", CONF, "-N", node], check=True, env=env)


def job_procs(jid, node):
    """slurmstepd of job JID and every process of the job on NODE."""
    out = []
    for p in pids():
        cmd = read_proc(p, "cmdline")
        if cmd.startswith(f"slurmstepd: [{jid}."):
            out.append(p)
            continue
        env = read_proc(p, "environ").split("\0")
        if f"SLURM_JOB_ID={jid}" in env and f"SLURMD_NODENAME={node}" in env:
            out.append(p)
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return not read_proc(pid, "stat").split(") ")[-1].startswith("Z")


def pct(values, p):
    """Nearest-rank percentile, p in 0..100."""
    v = sorted(values)
    return v[max(1, math.ceil(p / 100.0 * len(v))) - 1] if v else None


def stats(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"n": len(v), "median": statistics.median(v), "p99": pct(v, 99), "min": min(v), "max": max(v),
            "mean": sum(v) / len(v)}


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]


class Trainer:
    """Submits trainer.sh and reads what it logged / checkpointed."""

    def __init__(self, jobdir):
        self.dir = jobdir
        os.makedirs(jobdir, exist_ok=True)
        self.env = dict(os.environ, TRAIN_DIR=jobdir, **{MARK_JOB: BENCH})

    def submit(self, name):
        t0 = now()
        p = subprocess.run(["sbatch", "--parsable", "--requeue", "-J", name, "-n", "1",
                            "-o", os.path.join(self.dir, "%j.out"), TRAINER],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env)
        t1 = now()
        if p.returncode != 0:
            raise RuntimeError(f"sbatch failed: {p.stderr.strip()}")
        return p.stdout.strip().split(";")[0], t0, t1

    def starts(self, jid):
        try:
            lines = open(os.path.join(self.dir, f"{jid}.log")).read().splitlines()
        except OSError:
            return []
        out = []
        for l in lines:
            if l.startswith("start "):
                f = l.split()
                d = dict(x.split("=", 1) for x in f[2:])
                out.append({"t": float(f[1]), "node": d.get("node"), "restart_count": int(d.get("restart_count", 0)),
                            "from_step": int(d.get("from_step", 0)), "pid": int(d.get("pid", 0))})
        return out

    def step(self, jid):
        try:
            return int(open(os.path.join(self.dir, f"{jid}.ckpt")).read().strip() or 0)
        except (OSError, ValueError):
            return 0


def wait(pred, timeout, period=0.05):
    end = now() + timeout
    while now() < end:
        v = pred()
        if v:
            return v
        time.sleep(period)
    return None


def cancel_and_wait(jid, timeout=120):
    sh(["scancel", str(jid)], check=False)
    if not wait(lambda: str(jid) not in queue_ids(), timeout, 0.1):
        raise RuntimeError(f"job {jid} still in the queue {timeout} s after scancel")


def ensure_cluster_ready(all_nodes, timeout=90):
    """Every node's slurmd alive and every node IDLE, queue empty."""
    for n in all_nodes:
        if slurmd_pid(n) is None:
            start_slurmd(n)
    ok = wait(lambda: not queue_ids() and all(node_state(n) == "IDLE" for n in all_nodes), timeout, 0.1)
    if not ok:
        raise RuntimeError("cluster not ready: " + ", ".join(f"{n}={node_state(n)}" for n in all_nodes)
                           + f"; queue {queue_ids()}")


def provision_run(tr, i, a):
    time.sleep(random.uniform(0, a.jitter))
    jid, t0, t1 = tr.submit("prov")
    polls, st = 0, ""
    while True:
        st = squeue_state(jid)
        t = now()
        polls += 1
        if st in ("RUNNING", "COMPLETING", "COMPLETED", ""):
            break
        if t - t0 > a.timeout:
            raise RuntimeError(f"job {jid} not RUNNING {a.timeout} s after submit (state {st})")
        time.sleep(a.poll_provision)
    t_run = t
    node = show_job(jid).get("NodeList")
    s = wait(lambda: tr.starts(jid), 10, 0.02)
    cancel_and_wait(jid)
    r = {"i": i, "job": jid, "node": node, "provision_s": round(t_run - t0, 4), "sbatch_call_s": round(t1 - t0, 4),
         "state_seen": st, "polls": polls,
         "script_started_s": round(s[0]["t"] - t0, 4) if s else None, "loadavg": loadavg()}
    print(f"provision {i:3d}: job {jid} on {node}: RUNNING after {r['provision_s']:.3f} s "
          f"(sbatch {r['sbatch_call_s']*1e3:.0f} ms, {polls} polls; script started after "
          f"{r['script_started_s'] if r['script_started_s'] is not None else float('nan'):.3f} s) "
          f"load {r['loadavg'][0]}", flush=True)
    return r


def recovery_run(tr, k, a, all_nodes):
    ensure_cluster_ready(all_nodes)
    jid, t0, _ = tr.submit("rec")
    if not wait(lambda: squeue_state(jid) == "RUNNING", a.timeout, 0.02):
        raise RuntimeError(f"job {jid} did not start")
    t_running = now()
    if not wait(lambda: tr.step(jid) >= a.warm_steps, a.timeout, 0.05):
        raise RuntimeError(f"job {jid} wrote no checkpoint")
    first = tr.starts(jid)[0]
    node = show_job(jid).get("NodeList")
    if node != first["node"]:
        raise RuntimeError(f"job {jid}: scontrol says {node}, trainer says {first['node']}")
    ev = {}

    # --- the node crashes: slurmd, slurmstepd and the job's processes, SIGKILL ---
    victims = []
    d = slurmd_pid(node)
    if d is None:
        raise RuntimeError(f"no slurmd for {node}")
    victims.append(d)
    victims += job_procs(jid, node)
    t_kill = now()
    for p in victims:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    kill_call = now() - t_kill
    # anything the job forked between the scan and the kill
    late = [p for p in job_procs(jid, node) if alive(p)]
    for p in late:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    step_at_kill = tr.step(jid)

    def mark(key, t):
        ev.setdefault(key, round(t - t_kill, 3))

    recovered = None
    timeline = []
    while now() - t_kill < a.timeout:
        j = show_job(jid)
        ns = node_state(node)
        t = now()
        js, restarts, nl = j.get("JobState", ""), int(j.get("Restarts", "0") or 0), j.get("NodeList")
        if not timeline or timeline[-1][1:] != (ns, js, nl, restarts, j.get("Reason")):
            timeline.append((round(t - t_kill, 3), ns, js, nl, restarts, j.get("Reason")))
        if "NOT_RESPONDING" in ns:
            mark("node_not_responding", t)
        if ns.startswith("DOWN"):
            mark("node_down", t)
        if js == "PENDING":
            mark("job_requeued", t)
            if j.get("Reason") not in (None, "", "None"):
                ev.setdefault("pending_reason", j.get("Reason"))
                ev.setdefault("pending_begin_time", j.get("BeginTime"))
        if js == "RUNNING" and restarts >= 1 and nl and nl != node:
            recovered = t
            ev["running_again_on"] = nl
            break
        time.sleep(a.poll_recovery)
    if recovered is None:
        ev["failed"] = f"not RUNNING on another node {a.timeout} s after the kill"
    else:
        mark("running_again", recovered)
    # the new instance of the trainer: where it resumed from
    s = wait(lambda: len(tr.starts(jid)) >= 2 and tr.starts(jid), 30 if recovered else 1, 0.05) or tr.starts(jid)
    again = s[1] if len(s) >= 2 else None
    if again:
        ev["script_started_again"] = round(again["t"] - t_kill, 3)
    leftovers = [p for p in victims + late if alive(p)]

    # --- restore the node: restart slurmd, wait until it is back in service ---
    t_r = now()
    start_slurmd(node)
    back = wait(lambda: node_state(node) in ("IDLE", "MIXED", "ALLOCATED"), 120, 0.1)
    restore_s = round(now() - t_r, 3) if back else None
    # the resumed trainer goes on checkpointing
    progressed = bool(again) and bool(wait(lambda: tr.step(jid) > again["from_step"], 10, 0.1))
    cancel_and_wait(jid)

    if again is None:
        verdict = "no-restart"
    elif again["from_step"] == 0:
        verdict = "scratch"
    elif again["from_step"] == step_at_kill:
        verdict = "resumed"
    else:
        verdict = "resumed-other-step"
    r = {"run": k, "job": jid, "node_killed": node, "node_after": ev.get("running_again_on"),
         "recovery_s": ev.get("running_again"), "submit_to_running_s": round(t_running - t0, 4),
         "step_at_kill": step_at_kill, "from_step": again["from_step"] if again else None,
         "restart_count": again["restart_count"] if again else None, "verdict": verdict,
         "progressed_after_resume": progressed, "killed_pids": len(victims) + len(late),
         "kill_call_s": round(kill_call, 6), "killed_processes_alive_after": len(leftovers),
         "node_restore_s": restore_s, "events_s": ev, "timeline": timeline, "loadavg": loadavg()}
    print(f"recovery {k:3d}: job {jid} killed on {node} at step {step_at_kill} -> RUNNING on "
          f"{r['node_after']} after {r['recovery_s']} s (NOT_RESPONDING {ev.get('node_not_responding')}, "
          f"DOWN {ev.get('node_down')}, requeued {ev.get('job_requeued')}, script "
          f"{ev.get('script_started_again')}); from_step={r['from_step']} -> {verdict}; "
          f"{node} back in {restore_s} s; load {r['loadavg'][0]}", flush=True)
    return r


def fmt(x, nd=3):
    return "n/a" if x is None else f"{x:.{nd}f}"


def row(name, values):
    s = stats(values)
    if not s:
        return f"| {name} | 0 | n/a | n/a | n/a | n/a |"
    return f"| {name} | {s['n']} | {fmt(s['median'])} | {fmt(s['p99'])} | {fmt(s['min'])} | {fmt(s['max'])} |"


def report(res):
    c, m = res["config"], res["machine"]
    runs, prov = res["runs"], res["provision_runs"]
    L = []
    L.append(f"# Slurm recovery benchmark ({c['slurm_version']})")
    L.append("")
    L.append(f"- command: `{res['command']}`")
    L.append(f"- date: {res['started']} .. {res['finished']} (wall {res['wall_s']:.0f} s)")
    L.append(f"- machine: {m['host']}, {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB RAM, {m['os']}, "
             f"kernel {m['kernel']}")
    L.append(f"- load average (1/5/15 min): start {res['loadavg_start']}, end {res['loadavg_end']}; "
             f"1-min load over the samples: median {fmt(res['loadavg_1min_median'], 2)}, "
             f"max {fmt(res['loadavg_1min_max'], 2)}")
    L.append(f"- cluster: {len(c['nodes'])} logical nodes ({' '.join(c['nodes'])}) on this host, "
             f"{c['SchedulerType']}, SchedulerParameters={c['SchedulerParameters']}, "
             f"cred_expire={c['cred_expire']}, SlurmdTimeout={c['SlurmdTimeout']}, "
             f"ReturnToService={c['ReturnToService']}")
    L.append(f"- polls: provision every {c['poll_provision_s']} s (+ squeue time), recovery every "
             f"{c['poll_recovery_s']} s (+ 2 scontrol calls); median of an even n is the mean of the "
             "two middle values, p99 is nearest-rank (the maximum for n <= 100)")
    L.append("")
    L.append("| metric | n | median (s) | p99 (s) | min (s) | max (s) |")
    L.append("|---|---|---|---|---|---|")
    L.append(row("provision: submit -> RUNNING", res["provision_s"]))
    L.append(row("recovery: node killed -> RUNNING elsewhere", res["recovery_s"]))
    L.append("")
    L.append("Recovery phases, seconds after the kill:")
    L.append("")
    L.append("| phase | n | median (s) | p99 (s) | min (s) | max (s) |")
    L.append("|---|---|---|---|---|---|")
    for key, name in (("node_not_responding", "node NOT_RESPONDING"), ("node_down", "node DOWN"),
                      ("job_requeued", "job requeued (PENDING)"), ("running_again", "job RUNNING elsewhere"),
                      ("script_started_again", "trainer started again (its own log)")):
        L.append(row(name, [r["events_s"].get(key) for r in runs]))
    L.append(row("(job requeued -> RUNNING: the cred_expire hold)",
                 [r["events_s"]["running_again"] - r["events_s"]["job_requeued"] for r in runs
                  if "running_again" in r["events_s"] and "job_requeued" in r["events_s"]]))
    L.append(row("killed node back in service (slurmd restarted -> IDLE)", [r["node_restore_s"] for r in runs]))
    L.append(row("(submit -> RUNNING of the recovery jobs)", [r["submit_to_running_s"] for r in runs]))
    L.append(row("(sbatch call itself)", [r["sbatch_call_s"] for r in prov]))
    L.append("")
    v = collections.Counter(r["verdict"] for r in runs)
    L.append(f"Checkpoint: **{v.get('resumed', 0)} of {len(runs)} recoveries resumed from the checkpoint** "
             f"(from_step = the step checkpointed before the kill), {v.get('scratch', 0)} restarted from "
             f"scratch (from_step 0), {v.get('resumed-other-step', 0)} resumed from another step, "
             f"{v.get('no-restart', 0)} never restarted; "
             f"{sum(1 for r in runs if r['progressed_after_resume'])} went on checkpointing after the resume.")
    L.append(f"Failed recoveries (not RUNNING elsewhere within {c['timeout_s']} s, or a run that "
             f"raised an error): {res['failed_recoveries']}. Killed processes still alive afterwards: "
             f"{sum(r['killed_processes_alive_after'] for r in runs)}.")
    moves = collections.Counter(f"{r['node_killed']} -> {r['node_after']}" for r in runs)
    L.append("Nodes (killed -> ran again on): " + ", ".join(f"{k} x{n}" for k, n in sorted(moves.items())) + ".")
    pn = collections.Counter(r["node"] for r in prov)
    L.append("Provision jobs ran on: " + ", ".join(f"{k} x{n}" for k, n in sorted(pn.items())) + ".")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=50, help="recovery runs (one node kill each)")
    ap.add_argument("--provision", type=int, default=None, help="submit -> running samples (default: --kills)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 kills, 5 provision samples")
    ap.add_argument("--json", help="write raw samples and per-run details here")
    ap.add_argument("--md", help="write the markdown report here")
    ap.add_argument("--jitter", type=float, default=1.0, help="random pause 0..J s before each provision submit")
    ap.add_argument("--poll-provision", type=float, default=0.01)
    ap.add_argument("--poll-recovery", type=float, default=0.05)
    ap.add_argument("--warm-steps", type=int, default=3, help="checkpoints written before the kill")
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    if a.quick:
        a.kills, a.provision = 3, a.provision or 5
    if a.provision is None:
        a.provision = a.kills
    command = os.environ.get("MCJS_BENCH_COMMAND") or " ".join(shlex.quote(x) for x in sys.argv)

    if not in_netns():
        if not os.path.exists(NETNS):
            sys.exit("no bench cluster: run bench/slurm/start.sh first")
        env = dict(os.environ, MCJS_BENCH_COMMAND=command, SLURM_CONF=CONF)
        os.execvpe("nsenter", ["nsenter", f"--net={NETNS}", sys.executable] + sys.argv, env)
    os.environ["SLURM_CONF"] = CONF

    all_nodes = nodes()
    cfg_text = sh(["scontrol", "show", "config"])
    cfg = {}
    for line in cfg_text.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            cfg[k.strip()] = v.strip()
    auth = cfg.get("AuthInfo", "")
    m = re.search(r"cred_expire=(\d+)", auth)
    config = {
        "slurm_version": sh(["scontrol", "-V"]).strip(),
        "slurm_conf_template": "bench/slurm/slurm.conf",
        "nodes": all_nodes,
        "SchedulerType": cfg.get("SchedulerType"),
        "SchedulerParameters": cfg.get("SchedulerParameters"),
        "SelectType": cfg.get("SelectType"),
        "AuthInfo": auth,
        "cred_expire": int(m.group(1)) if m else 120,
        "SlurmdTimeout": cfg.get("SlurmdTimeout"),
        "MessageTimeout": cfg.get("MessageTimeout"),
        "ReturnToService": cfg.get("ReturnToService"),
        "KillWait": cfg.get("KillWait"),
        "ProctrackType": cfg.get("ProctrackType"),
        "job": "bench/slurm/trainer.sh via sbatch --requeue -n 1 (1 step/s, step counter checkpoint, resumes from it)",
        "kill": "SIGKILL to the node's slurmd, the job's slurmstepd and all the job's processes at once",
        "recovery_clock": "from just before the first SIGKILL to the first scontrol poll showing the job "
                          "RUNNING on another node with Restarts>=1",
        "provision_clock": "from just before sbatch is called to the first squeue poll showing RUNNING",
        "warm_steps": a.warm_steps,
        "poll_provision_s": a.poll_provision,
        "poll_recovery_s": a.poll_recovery,
        "jitter_s": a.jitter,
        "timeout_s": a.timeout,
    }
    meminfo = dict(l.split(":", 1) for l in open("/proc/meminfo").read().splitlines() if ":" in l)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    osrel = dict(l.strip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
    machine = {"host": socket.gethostname(), "nproc": os.cpu_count(), "cpu": cpu,
               "mem_gib": round(int(meminfo["MemTotal"].split()[0]) / 2**20, 1),
               "os": osrel.get("PRETTY_NAME", "?").strip('"'), "kernel": platform.release()}

    started = datetime.datetime.now().astimezone()
    t_start = now()
    load_start = loadavg()
    tag = started.strftime("%Y%m%d-%H%M%S")
    tr = Trainer(os.path.join(BENCH, "jobs", tag))
    print(f"# Slurm benchmark: {a.provision} provision samples, {a.kills} kills; nodes {' '.join(all_nodes)}; "
          f"load {load_start}", flush=True)

    prov, runs = [], []

    def result():
        finished = datetime.datetime.now().astimezone()
        loads = [r["loadavg"][0] for r in prov + runs]
        return {
            "system": "slurm",
            "provision_s": [r["provision_s"] for r in prov],
            "recovery_s": [r["recovery_s"] for r in runs if r["recovery_s"] is not None],
            "config": config,
            "resumed_from_checkpoint": sum(1 for r in runs if r["verdict"] == "resumed"),
            "restarted_from_scratch": sum(1 for r in runs if r["verdict"] == "scratch"),
            "failed_recoveries": sum(1 for r in runs if r["recovery_s"] is None),
            "command": command,
            "started": started.isoformat(timespec="seconds"),
            "finished": finished.isoformat(timespec="seconds"),
            "wall_s": round(now() - t_start, 1),
            "machine": machine,
            "loadavg_start": load_start,
            "loadavg_end": loadavg(),
            "loadavg_1min_median": statistics.median(loads) if loads else None,
            "loadavg_1min_max": max(loads) if loads else None,
            "provision_runs": prov,
            "runs": runs,
        }

    def save(final):
        if a.json:
            with open(a.json + ("" if final else ".partial"), "w") as f:
                json.dump(result(), f, indent=1)
                f.write("\n")

    ensure_cluster_ready(all_nodes)
    for i in range(a.provision):
        prov.append(provision_run(tr, i + 1, a))
    save(False)
    for k in range(a.kills):
        try:
            runs.append(recovery_run(tr, k + 1, a, all_nodes))
        except Exception as e:  # keep going: record the run as failed, clean up, next run
            print(f"recovery {k + 1:3d}: ERROR {e}", flush=True)
            runs.append({"run": k + 1, "error": str(e), "recovery_s": None, "verdict": "error",
                         "node_killed": None, "node_after": None, "events_s": {"failed": str(e)},
                         "node_restore_s": None, "submit_to_running_s": None, "progressed_after_resume": False,
                         "killed_processes_alive_after": 0, "loadavg": loadavg()})
            for j in queue_ids():
                sh(["scancel", j], check=False)
            wait(lambda: not queue_ids(), 120, 0.2)
        save(False)

    res = result()
    text = report(res)
    print()
    print(text)
    if a.json:
        save(True)
        if os.path.exists(a.json + ".partial"):
            os.remove(a.json + ".partial")
        print(f"wrote {a.json}")
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
        print(f"wrote {a.md}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""N trivial jobs on a Slurm cluster with at most CAP in flight, straight through sbatch or
through a running Berth (docs/slurm.md, "Measured"); prints the time until all finished.

  .ci/slurm-bench.py N CAP SLURM_CONF              # sbatch loop (XARGS="…" adds sbatch options,
                                                   # SCRIPT=FILE submits a script file, not --wrap)
  .ci/slurm-bench.py N CAP SLURM_CONF BERTH_URL    # through Berth (started with --slurm-max-in-flight CAP
                                                   # and a config whose flavor selects the cluster)
"""
import json, os, subprocess, sys, time, urllib.request
N = int(sys.argv[1]); CAP = int(sys.argv[2]); conf = sys.argv[3]; url = sys.argv[4] if len(sys.argv) > 4 else None
env = dict(os.environ, SLURM_CONF=conf); env.pop("SLURM_JWT", None)
def sh(*a): return subprocess.run(a, env=env, capture_output=True, text=True).stdout
if url is None:
    t0 = time.time(); ids = []; live = set()
    while len(ids) < N or live:
        if live:
            out = sh("squeue", "-h", "-t", "PD,R,CG,CF", "-j", ",".join(live), "-o", "%i")
            live &= set(out.split())
        while len(ids) < N and len(live) < CAP:
            i = sh("sbatch", "--parsable", *os.environ.get("XARGS","").split(), "-o", "/dev/null", "-e", "/dev/null", *(os.environ["SCRIPT"].split() if os.environ.get("SCRIPT") else ["--wrap", "true"])).strip().split(";")[0]
            ids.append(i); live.add(i)
        if live: time.sleep(0.1)
    print(f"sbatch direct: {N} jobs, cap {CAP}: {time.time()-t0:.2f} s")
else:
    def post(body):
        r = urllib.request.Request(url + "/api/v1/jobs", json.dumps(body).encode(), {"content-type": "application/json"})
        return json.load(urllib.request.urlopen(r))["id"]
    t0 = time.time()
    ids = [post({"entrypoint": "true", "resources": {"cpu": 1}}) for _ in range(N)]
    tsub = time.time() - t0
    done = set()
    while len(done) < N:
        for i in ids:
            if i in done: continue
            j = json.load(urllib.request.urlopen(f"{url}/api/v1/jobs/{i}"))
            if j["state"] in ("succeeded", "failed", "cancelled", "timed_out", "rejected"):
                assert j["state"] == "succeeded", j
                done.add(i)
        time.sleep(0.2)
    print(f"through Berth: {N} jobs, cap {CAP}: {time.time()-t0:.2f} s (submits took {tsub:.2f} s)")

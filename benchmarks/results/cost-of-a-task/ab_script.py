import subprocess, sys, re, statistics, os
trees = sys.argv[1].split(","); rounds = int(sys.argv[2]); graph = sys.argv[3] if len(sys.argv) > 3 else "seq3"
n = os.environ.get("NINV", "300")
res = {t: [] for t in trees}
for r in range(rounds):
    order = trees if r % 2 == 0 else trees[::-1]
    for t in order:
        out = subprocess.run(["/work/main/.venv/bin/python", "/tmp/cpu.py", graph, n], cwd=t, capture_output=True, text=True, timeout=600).stdout
        m = re.search(r"median ([\d.]+) ms; total CPU ([\d.]+)", out)
        roles = dict((a, float(u) + float(s)) for a, u, s in re.findall(r"(\w+)\s+user\s+([\d.]+) sys\s+([\d.]+)", out))
        res[t].append((float(m.group(1)), float(m.group(2)), roles))
base = trees[0]
for t in trees:
    lat = statistics.median(x[0] for x in res[t]); cpu = statistics.median(x[1] for x in res[t])
    roles = {k: statistics.median(x[2].get(k, 0) for x in res[t]) for k in res[t][0][2]}
    pr = [b[1] / a[1] for a, b in zip(res[base], res[t])]
    pl = [b[0] / a[0] for a, b in zip(res[base], res[t])]
    print(f"{t}: {graph} latency {lat:.2f} ms, CPU {cpu:.2f} ms  " + " ".join(f"{k} {v:.2f}" for k, v in roles.items())
          + f" | paired CPU ratio median {statistics.median(pr):.3f} (min {min(pr):.3f} max {max(pr):.3f}), latency {statistics.median(pl):.3f}")
    print("   CPU per round:", " ".join(f"{x[1]:.1f}" for x in res[t]))

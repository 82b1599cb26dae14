import sys, os, time, tempfile, psutil
from pathlib import Path
sys.path.insert(0, os.getcwd())
import hayata_py as hy
from benchmarks import graphs as G
from benchmarks._util import roles as find_roles
graph = sys.argv[1] if len(sys.argv) > 1 else "seq3"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
def ct(p):
    try: t = p.cpu_times(); return (t.user, t.system)
    except psutil.Error: return (0, 0)
with tempfile.TemporaryDirectory() as tmp, hy.AgentSystem(Path(tmp)/"hy", log_telemetry=os.environ.get("LOGT","1")=="1") as system:
    agent = system.start_agent(G.hy_config(graph))
    for _ in range(20): assert agent.wait(agent.run("w"), 30).ok
    roles = {pid: r for r, pids in find_roles(system.tree()).items() for pid in pids}
    roles[system.admin_pid] = "admin"
    procs = [psutil.Process(p) for p in roles]
    me = psutil.Process()
    b = {p.pid: ct(p) for p in procs}; m0 = ct(me)
    lat = []
    for _ in range(N):
        t = time.perf_counter(); assert agent.wait(agent.run("x"), 30).ok; lat.append(time.perf_counter() - t)
    per = {}
    for p in procs:
        u, s = ct(p); r = roles[p.pid]
        pu, ps = per.get(r, (0, 0)); per[r] = (pu + (u - b[p.pid][0]) * 1000 / N, ps + (s - b[p.pid][1]) * 1000 / N)
    u, s = ct(me); per["caller"] = ((u - m0[0]) * 1000 / N, (s - m0[1]) * 1000 / N)
    lat.sort()
    print(f"{graph} median {lat[len(lat)//2]*1000:.2f} ms; total CPU {sum(a+b for a,b in per.values()):.2f} ms")
    for r, (u, s) in sorted(per.items()):
        if u + s > 0.01: print(f"  {r:12s} user {u:6.2f} sys {s:6.2f}")

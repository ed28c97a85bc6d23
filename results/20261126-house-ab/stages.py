#!/usr/bin/env python3
# The stage account of `oaectl demo --report` files, medians per side:
# nanoseconds of each core per verb, by stage (time per frame received in
# the timed busy iterations, times frames received per verb).
#   stages.py "DIR/dpdk-memif-old-*.json" "DIR/dpdk-memif-new-*.json"
import json,sys,glob,statistics
names=["driver_receive","link","timers","completion","application","transmit_build","driver_transmit","other"]
def acct(path):
    v=json.load(open(path)); done=v["workload"]["completed"]; out={}
    for side,st in zip("ab",v["stats"]):
        busy=[0]*8; fr=0; rx=0
        for q in st["queues"]:
            a=q.get("stages",{}); fr+=a.get("frames",0); rx+=q["pipeline"]["rx_frames"]
            for i,x in enumerate(a.get("busy_ns",[0]*8)): busy[i]+=x
        out[side]=[x*rx/max(fr,1)/done for x in busy]
    return out
for pat in sys.argv[1:]:
    files=sorted(glob.glob(pat))
    if not files: continue
    accs=[acct(f) for f in files]
    for side in "ab":
        med=[statistics.median(a[side][i] for a in accs) for i in range(8)]
        print(f"{pat.split('/')[-1]:28s} {side} "+" ".join(f"{n[:8]}={m:5.0f}" for n,m in zip(names,med))+f" total={sum(med):5.0f}")

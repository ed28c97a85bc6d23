#!/bin/bash
# A/B: the quoted run's code (old, built at /tmp/oldtree into /tmp/oldtarget)
# against this checkout's release build (new), alternating, four times
# each, side a on core 0 and side b on core 1, with the suite's settings.
#   ab.sh line-rate   CAS, 64 slots and 64 lanes, over net_memif and veth
#   ab.sh latency     CAS, 1 slot and 1 lane, over veth
#   ab.sh memif-latency  CAS, 1 slot and 1 lane, over net_memif
set -u
case "${1:-}" in
  line-rate) in_flight=64; configs="dpdk-memif veth-pair" ;;
  latency) in_flight=1; configs="veth-pair" ;;
  memif-latency) in_flight=1; configs="dpdk-memif" ;;
  *) echo "usage: $0 line-rate|latency|memif-latency" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/../.."
out=/tmp/house-ab-$1-$(date +%H%M%S); mkdir -p "$out"
for rep in 1 2 3 4; do
  for side in old new; do
    for cfg in $configs; do
      if [ $side = old ]; then bin=/tmp/oldtarget/release/oaectl; conf=/tmp/oldtree/configs/$cfg.toml
      else bin=target/release/oaectl; conf=configs/$cfg.toml; fi
      log=$out/$cfg-$side-$rep.log
      $bin demo --config "$conf" --transport oae --verbs cas --seconds 3 \
        --lanes $in_flight --slots $in_flight --cores 0,1 --loss-ppm 0 --corrupt-ppm 0 \
        --flaps 0 --min-round-us 2000 --report "$out/$cfg-$side-$rep.json" > "$log" 2>&1
      echo "$cfg $side $rep rc=$? $(grep -E 'verbs/s  |latency p50' "$log" | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
echo "done: $out"

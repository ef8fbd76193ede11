#!/usr/bin/env bash
# Installs the system packages the test-suite needs (Debian 12).  Idempotent and quiet
# when everything is present; needs root (or sudo) only when something is missing.
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(default-jre-headless)
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# promtool validates infra/prometheus.yml (tests skip that check without it); ~15 s to install
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# the network-cut test runs a container in a network namespace cut off by nftables rules
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nft >/dev/null 2>&1 || need+=(nftables)
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null

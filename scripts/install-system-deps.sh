#!/usr/bin/env bash
# System packages used by the tests and benchmarks: Chromium (browser tests),
# transmission-show (a second .torrent reader), redis-server (the tracker's shared store and, run with
# --sentinel, its sentinels: Debian's redis-sentinel package is that binary plus a service we do not want),
# and the third-party baselines
# (mktorrent, opentracker, aria2c, nginx, wrk); iproute2 (ip, tc) for the shaped
# federation, nftables for its firewall (peer ports blocked, web seeds open: tests/e2e/test_webseeds.py),
# bindfs and fuse3 for bench_wan_hung's and bench_wan_arrival's frozen-storage site; the third-party BitTorrent
# clients of tests/clients/ (qbittorrent-nox, rtorrent, ctorrent; aria2c above); and a real SLURM for
# the batch-array tests (slurm-wlm, munge: btswarm/testbed/localslurm.py configures and starts its
# own daemons; the packages' own services are not used); openssl (the TLS tests make their own CA)
# and systemd for systemd-analyze, which checks deploy/systemd/ (it needs no systemd running: in a
# container without it as PID 1 the package installs and `systemd-analyze verify` works); tmux, the
# real terminal of bt-get's display test; faketime, the wrong clock of one site (tests/faults/test_clock.py);
# xrootd-server, a real storage door with its HTTP plugin as a site's web seed (tests/btget/test_door_xrootd.py),
# and xrootd-scitokens-plugins, the door checking the federation's bearer tokens (tests/access/test_door_tokens.py);
# stress-ng, the load the suite must pass beside (CONTRIBUTING.md); squid, a site's proxy as a worker
# node's only way out (btswarm/testbed/squid.py: its own config and daemon, not the package's service).
# Installs only what is missing.
set -euo pipefail

declare -A need=(
  [chromium]=chromium [transmission-show]=transmission-cli [mktorrent]=mktorrent
  [opentracker]=opentracker [aria2c]=aria2 [nginx]=nginx-light [wrk]=wrk
  [tc]=iproute2 [nft]=nftables [bindfs]=bindfs [fusermount3]=fuse3
  [qbittorrent-nox]=qbittorrent-nox [rtorrent]=rtorrent [ctorrent]=ctorrent
  [slurmctld]=slurm-wlm [slurmd]=slurm-wlm [sbatch]=slurm-wlm [sacct]=slurm-wlm [munged]=munge
  [redis-server]=redis-server
  [openssl]=openssl [systemd-analyze]=systemd [tmux]=tmux [faketime]=faketime [xrootd]=xrootd-server
  [stress-ng]=stress-ng [squid]=squid
)
missing=()
for cmd in "${!need[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || [ -x "/usr/bin/$cmd" ] || missing+=("${need[$cmd]}")
done
# Libraries, not commands: looked for as files.
declare -A need_lib=([libXrdAccSciTokens-5.so]=xrootd-scitokens-plugins)
for lib in "${!need_lib[@]}"; do
  ls /usr/lib/*/"$lib" >/dev/null 2>&1 || missing+=("${need_lib[$lib]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "install-system-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "install-system-deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

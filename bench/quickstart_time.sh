#!/usr/bin/env bash
# Times README command 1 (scripts/quickstart.sh) as a new user meets it: in a fresh Debian 12 (debootstrap
# minbase, nothing else installed), for a commit of this repository. Needs root, debootstrap and the
# Debian mirror. docs/PERFORMANCE.md, "Quick start time", has the numbers and how to read them.
#
#   bench/quickstart_time.sh COMMIT [COMMIT...]    one run per commit, back to back
# Environment: QS_WORK (default /var/tmp/sw-quickstart): the base system is made there once and copied
# for every run; each run's log is QS_WORK/COMMIT.log.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${QS_WORK:-/var/tmp/sw-quickstart}
mkdir -p "$work"
if [[ ! -x $work/base/bin/bash ]]; then
  rm -rf "$work/base"
  debootstrap --variant=minbase bookworm "$work/base" http://deb.debian.org/debian >"$work/debootstrap.log"
fi

for commit in "$@"; do
  root="$work/run"
  rm -rf "$root"
  cp -a "$work/base" "$root"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mkdir -p "$root/root/sw"
  git -C "$repo" archive "$commit" | tar -x -C "$root/root/sw"
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount --rbind /sys "$root/sys"
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s.%N)
  rc=0
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    bash -c 'cd /root/sw && bash scripts/quickstart.sh' >"$work/$commit.log" 2>&1 || rc=$?
  end=$(date +%s.%N)
  umount -R "$root/proc" "$root/dev" "$root/sys" || true
  packages=$(grep -ho '[0-9]* newly installed' "$work/$commit.log" | head -n 1)
  printf '%s: exit %d, %.0f s wall, %s, load before %s, after %s\n' "$commit" "$rc" "$(echo "$end - $start" | bc)" \
    "${packages:-? newly installed}" "$load" "$(cut -d' ' -f1-3 /proc/loadavg)"
  rm -rf "$root"
done

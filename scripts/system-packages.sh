#!/usr/bin/env bash
# Install the Debian packages the tests need, only when missing: SLURM (controller, node daemon, client),
# munge, pdsh, and Chromium (headless: the HTML reports are checked in a real browser). About 3.4 MB and 12-15 s
# without Chromium; Chromium adds about 270 MB installed and a minute. Without root (or apt), say what is missing and carry on: the tests
# that need SLURM then fail with that reason.
set -uo pipefail
need=()
for cmd in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge pdsh:pdsh chromium:chromium; do
    command -v "${cmd%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${cmd%%:*}" ] || need+=("${cmd##*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "Warning: missing Debian packages ${need[*]}; install them as root (apt-get install ${need[*]})." >&2
    exit 0
fi
echo "system-packages: installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${need[@]}" >/tmp/system-packages.log 2>&1 \
    || { apt-get update -q >>/tmp/system-packages.log 2>&1 && \
         apt-get install -y -q --no-install-recommends "${need[@]}" >>/tmp/system-packages.log 2>&1; } \
    || { echo "Warning: apt-get install ${need[*]} failed; see /tmp/system-packages.log" >&2; exit 0; }

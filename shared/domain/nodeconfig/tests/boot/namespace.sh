#!/bin/bash
# Runs inside `unshare --mount` for boot_script_runs.rs: gives the boot script
# private copies of the places it writes (tmpfs over the package's and
# systemd's directories, bind mounts over /etc/fstab, passwd and group), plays
# udev by linking the loop device under the EBS volume's NVMe id, then runs
# the script and records what the test checks. Every mount vanishes with
# the namespace.
#
# Usage: namespace.sh DIR LOOP_DEVICE VOLUME_ID twice MARKER
#   runs the script, writes MARKER on the volume, "reboots" (unmounts it),
#   runs the script again, reboots again and mounts what /etc/fstab lists;
# or:    namespace.sh DIR LOOP_DEVICE VOLUME_ID once
#   runs the script once, whatever it exits with.
set -euo pipefail
dir=$1 loop=$2 volume=$3 mode=$4
data=/var/lib/elasticsearch
mount --make-rprivate /
for d in /etc/elasticsearch /usr/share/elasticsearch "${data}" /var/log/elasticsearch \
  /etc/systemd/system /etc/sysctl.d /dev/disk; do
  mount -t tmpfs -o mode=0755 floe-test "${d}"
done
mkdir /dev/disk/by-id
ln -s "${loop}" "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${volume//-/}"
for f in fstab passwd group; do
  mount --bind "${dir}/etc/${f}" "/etc/${f}"
done

facts() {
  {
    echo "uuid=$(blkid -p -s UUID -o value "${loop}" || true)"
    echo "type=$(blkid -p -s TYPE -o value "${loop}" || true)"
    echo "mounted=$(mountpoint -d "${data}" || true)"
    echo "device=$(mountpoint -x "${loop}")"
    echo "marker=$(cat "${data}/marker" 2>/dev/null || true)"
  } >"${dir}/facts-$1"
}

run() {
  local started status=0
  started=$(date +%s%N)
  bash "${dir}/user-data.sh" >"${dir}/console-$1" 2>&1 || status=$?
  echo "status=${status} ms=$(( ($(date +%s%N) - started) / 1000000 ))" >"${dir}/status-$1"
  facts "$1"
  return "${status}"
}

if [ "${mode}" = once ]; then
  run 1 || true
  exit 0
fi
run 1
echo "$5" >"${data}/marker"
umount "${data}"
run 2
umount "${data}"
# What systemd does at the next boot: mount what /etc/fstab lists.
mount -a
facts reboot

stat -c '%n %U %G %a' /etc/elasticsearch /etc/elasticsearch/certs /etc/elasticsearch/certs/* \
  /etc/elasticsearch/elasticsearch.yml /etc/elasticsearch/jvm.options.d/floe.options \
  /etc/elasticsearch/elasticsearch.keystore "${data}" >"${dir}/stat"
mkdir -p "${dir}/copy"
for d in /etc/elasticsearch /usr/share/elasticsearch "${data}" /etc/systemd/system /etc/sysctl.d; do
  mkdir -p "${dir}/copy${d}"
  cp -a "${d}/." "${dir}/copy${d}/"
done

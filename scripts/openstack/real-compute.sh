# Real compute for the loopback cloud, sourced by scripts/start-openstack (its functions and
# variables: say, die, launch, alive, q, mysql_root, with_services_blocked, DIR, E, HERE, PY,
# DBU). A second nova-compute, host windtunnel-real, on Nova's libvirt driver with QEMU's
# emulation (virt_type=qemu: /dev/kvm is not usable on the machines this runs on), in an
# aggregate and availability zone of its own (wt-real): a server goes there only when it
# asks for that zone, so the fast tests keep the fake compute (nova.conf's
# default_schedule_zone). Its guests sit on bridge wtbr0, whose only other port leads into
# network namespace wtgw holding 10.77.1.1: the one address a guest can reach, where a test
# puts a relay to the one host service it needs (orchestration/vm/relay.py). No route, no NAT:
# the guests reach nothing else. Images come from scripts/build-cloud-image (cached by
# digest under .data/cloud-images/), uploaded to Glance as kernel, ramdisk and qcow2 disk.
# docs/backends/openstack-devcloud.md, "Real VMs", explains the pieces and the figures.

REAL_HOST="windtunnel-real"
REAL_BRIDGE="wtbr0"
REAL_NETNS="wtgw"
REAL_GATEWAY="10.77.1.1"
REAL_PACKAGES=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients python3-libvirt
               qemu-system-x86 qemu-utils genisoimage socat)
QEMU_CONF=/etc/libvirt/qemu.conf
QEMU_MARK="# windtunnel loopback cloud: QEMU runs guests as root, without cgroups or labels"

real_compute_start() {
  local missing=() p
  for p in "${REAL_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    say "installing libvirt and QEMU for real VMs: ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null
    with_services_blocked apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 \
      -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null || return 1
  fi
  # libvirt's QEMU driver without systemd: the user its package expects must exist even when
  # qemu.conf says root; no cgroups (this machine's are a hybrid) and no security driver
  getent group kvm >/dev/null || groupadd -r kvm
  getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
  id libvirt-qemu >/dev/null 2>&1 || useradd -r -g kvm -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
  mkdir -p /var/log/libvirt /var/lib/libvirt/qemu /var/cache/libvirt/qemu /run/libvirt
  if ! grep -qxF "$QEMU_MARK" "$QEMU_CONF" 2>/dev/null; then
    printf '\n%s\nuser = "root"\ngroup = "root"\ndynamic_ownership = 0\nsecurity_driver = "none"\ncgroup_controllers = [ ]\n' \
      "$QEMU_MARK" >> "$QEMU_CONF"
    pkill -x libvirtd 2>/dev/null || true   # it reads qemu.conf when it starts
    sleep 0.5
  fi
  launch virtlogd "/usr/sbin/virtlogd" /usr/sbin/virtlogd
  launch libvirtd "/usr/sbin/libvirtd" /usr/sbin/libvirtd
  local ok=""
  for _ in $(seq 100); do
    if virsh -c qemu:///system version >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.2
  done
  [ -n "$ok" ] || { say "libvirtd does not answer; see $DIR/log/libvirtd.log"; return 1; }

  # the guests' network: a bridge with no address, and a namespace holding the gateway address
  ip link show "$REAL_BRIDGE" >/dev/null 2>&1 || ip link add "$REAL_BRIDGE" type bridge
  ip link set "$REAL_BRIDGE" up
  if ! ip netns list | grep -qw "$REAL_NETNS"; then
    ip netns add "$REAL_NETNS"
    ip link add "$REAL_NETNS-br" type veth peer name "$REAL_NETNS-in"
    ip link set "$REAL_NETNS-in" netns "$REAL_NETNS"
    ip link set "$REAL_NETNS-br" master "$REAL_BRIDGE" up
    ip netns exec "$REAL_NETNS" ip addr add "$REAL_GATEWAY/24" dev "$REAL_NETNS-in"
    ip netns exec "$REAL_NETNS" ip link set "$REAL_NETNS-in" up
    ip netns exec "$REAL_NETNS" ip link set lo up
  fi

  # nova-compute on libvirt: the fake host's configuration with its own host, paths and driver
  mkdir -p "$DIR/real"/{instances,lock,state}
  sed -e "s/^host = .*/host = $REAL_HOST/" \
      -e 's/^compute_driver = .*/compute_driver = libvirt.LibvirtDriver/' \
      -e "s|^state_path = .*|state_path = $DIR/real/state|" \
      -e "s|^instances_path = .*|instances_path = $DIR/real/instances|" \
      -e "s|^lock_path = .*|lock_path = $DIR/real/lock|" \
      "$E/nova/nova-compute.conf" > "$E/nova/nova-compute-real.conf"
  cat >> "$E/nova/nova-compute-real.conf" <<EOF
[DEFAULT]
# the guests read their user data and static address from a config drive (no metadata service)
force_config_drive = true
config_drive_format = iso9660
mkisofs_cmd = genisoimage
force_raw_images = false
use_cow_images = true
reserved_host_memory_mb = 4096
[libvirt]
virt_type = qemu
connection_uri = qemu:///system
cpu_mode = none
images_type = qcow2
[workarounds]
disable_rootwrap = true
EOF
  launch nova-compute-real "$DIR/bin/nova-compute-real " "$DIR/bin/nova-compute-real" \
    --config-file "$E/nova/nova-compute-real.conf" --log-file "$DIR/log/nova-compute-real.log"
  local mapped=""
  for _ in $(seq 240); do
    if [ -n "$(q "SELECT host FROM ${DBU}_nova_api.host_mappings WHERE host='$REAL_HOST'")" ]; then mapped=1; break; fi
    if [ -n "$(q "SELECT host FROM ${DBU}_nova.compute_nodes WHERE host='$REAL_HOST' AND deleted=0")" ]; then
      "$DIR/bin/nova-manage" --config-file "$E/nova/nova.conf" cell_v2 discover_hosts >> "$DIR/log/nova-manage.log" 2>&1 9>&- || true
      continue
    fi
    alive nova-compute-real "$DIR/bin/nova-compute-real " || { say "nova-compute-real exited; see $DIR/log/nova-compute-real.log"; return 1; }
    sleep 0.5
  done
  [ -n "$mapped" ] || { say "the compute host $REAL_HOST did not register; see $DIR/log/nova-compute-real.log"; return 1; }

  # the base image (built once per recipe, then cached), its Glance images, the zone, the network
  local image
  image="$("$ROOT/scripts/build-cloud-image" 2>> "$DIR/log/build-cloud-image.log" 9>&-)" ||
    { say "the base image did not build; see $DIR/log/build-cloud-image.log"; return 1; }
  WT_OS_REAL_IMAGE="$image" WT_OS_REAL_HOST="$REAL_HOST" WT_OS_REAL_GATEWAY="$REAL_GATEWAY" \
    WT_OS_REAL_NETNS="$REAL_NETNS" "$PY" "$HERE/setup.py" real 9>&- || { say "real compute setup failed"; return 1; }
}

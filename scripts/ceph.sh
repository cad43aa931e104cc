#!/usr/bin/env bash
# A one-node Ceph cluster (monitor, one OSD, RADOS Gateway) on 127.0.0.1, for trying s3:// and for
# the tests. Local use only: no authentication between daemons (no cephx), one replica, fixed S3
# keys.
#
#   scripts/ceph.sh start [DIR]   create the cluster in DIR on first start (with a bucket "ckpt"),
#                                 start it, print the env
#   scripts/ceph.sh stop [DIR]    stop the daemons started from DIR, by their pid files
#   scripts/ceph.sh status [DIR]  say which daemons run and whether S3 answers
#   scripts/ceph.sh env [DIR]     print the AWS_* variables that point an S3 client at it
#
# DIR defaults to $CEPH_DIR or tmp/ceph. Ports: $CEPH_MON_PORT (default 6789) and $CEPH_RGW_PORT
# (default 7480). Needs the Debian packages radosgw, ceph-mon and ceph-osd (16.2):
#   apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd
#
# The OSD is a BlueStore whose block device is a sparse file outside the OSD directory (it grows
# with what is stored, on disk, not in RAM as memstore would).
set -euo pipefail

cmd="${1:-}"
DIR="${2:-${CEPH_DIR:-tmp/ceph}}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
MON_PORT="${CEPH_MON_PORT:-6789}"
RGW_PORT="${CEPH_RGW_PORT:-7480}"
CONF="$DIR/ceph.conf"
ACCESS_KEY="ckpt-local-access-key"
SECRET_KEY="ckpt-local-secret-key"
RGW_NAME="client.rgw.local"

say() { echo "ceph.sh: $*" >&2; }

print_env() {
  echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT"
  echo "export AWS_ACCESS_KEY_ID=$ACCESS_KEY"
  echo "export AWS_SECRET_ACCESS_KEY=$SECRET_KEY"
  echo "export AWS_REGION=us-east-1"
}

# The pid in $1 when that process is alive.
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid="$(cat "$1" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

s3_answers() {
  # RGW answers an anonymous GET / with 200 and an empty bucket list.
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$RGW_PORT/" 2>/dev/null || true)"
  [ "$code" = 200 ]
}

write_conf() {
  local fsid="$1"
  cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon_host = v1:127.0.0.1:$MON_PORT
public_addr = 127.0.0.1
ms_bind_msgr2 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
auth_allow_insecure_global_id_reclaim = true
keyring = $DIR/keyring
run_dir = $DIR/run
admin_socket = $DIR/run/\$name.asok
log_file = $DIR/log/\$name.log
pid_file = $DIR/run/\$name.pid
crash_dir = $DIR/crash
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_data_avail_crit = 1
mon_data_avail_warn = 2
mon_max_pg_per_osd = 1000
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0

[mon]
mon_data = $DIR/mon/\$cluster-\$id

[osd]
osd_data = $DIR/osd/\$cluster-\$id
osd_objectstore = bluestore
bluestore_block_path = $DIR/block/\$cluster-\$id.block
bluestore_block_size = 21474836480
bluestore_block_create = true
bluestore_cache_autotune = false
bluestore_cache_size = 134217728
osd_memory_target = 939524096
osd_class_update_on_start = false
osd_crush_update_on_start = false
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
ms_bind_port_min = 6800
ms_bind_port_max = 7300

[$RGW_NAME]
rgw_frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw_data = $DIR/rgw
rgw_thread_pool_size = 64
rgw_enable_usage_log = false
rgw_multipart_min_part_size = 65536
# Space of deleted and overwritten objects is reclaimed after a minute, not RGW's default two
# hours: repeated 1 GiB bench saves filled the 20 GiB OSD (then every PUT hangs, HEALTH_ERR full).
rgw_gc_obj_min_wait = 60
rgw_gc_processor_period = 60
EOF
}

# Runs a Ceph command line against this cluster's config.
c() { "$@" -c "$CONF"; }

create() {
  say "creating a cluster in $DIR"
  mkdir -p "$DIR"/{run,log,crash,mon,osd,block,rgw}
  local fsid
  fsid="$(cat /proc/sys/kernel/random/uuid)"
  write_conf "$fsid"
  ceph-authtool --create-keyring "$DIR/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  monmaptool --create --addv a "[v1:127.0.0.1:$MON_PORT]" --fsid "$fsid" "$DIR/monmap" >/dev/null
  c ceph-mon --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/keyring"
}

# A setup command the monitor may refuse for a moment although it has just answered: once in many
# CI runs, `osd new` right after `mon stat` succeeded failed with "Error EPERM: problem getting
# command descriptions from mon". Tried up to 10 times, a second apart.
retry() {
  local i
  for i in $(seq 10); do
    if "$@"; then return 0; fi
    [ "$i" -lt 10 ] || return 1
    say "retrying in 1 s: $*"
    sleep 1
  done
}

wait_for() {
  local what="$1" tries="$2"
  shift 2
  for _ in $(seq "$tries"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  say "$what did not come up; see $DIR/log"
  return 1
}

start() {
  command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v radosgw >/dev/null || {
    say "ceph-mon, ceph-osd or radosgw is missing: apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd"
    exit 1
  }
  if alive "$DIR/run/rgw.pid" && s3_answers; then
    say "already running"
    print_env
    return 0
  fi
  if s3_answers; then
    say "something else already answers on 127.0.0.1:$RGW_PORT (a cluster started from another directory?); stop it or set CEPH_RGW_PORT and CEPH_MON_PORT"
    exit 1
  fi
  [ -f "$CONF" ] || create
  local t0=$SECONDS

  # Daemons fork into the background; what they print before that goes to the log directory.
  alive "$DIR/run/mon.a.pid" || c ceph-mon -i a 2>>"$DIR/log/start.log"
  wait_for "ceph-mon" 40 timeout 5 ceph -c "$CONF" mon stat

  if [ ! -f "$DIR/osd/ceph-0/ready" ] || [ ! -f "$DIR/osd/ceph-0/whoami" ]; then
    local uuid
    uuid="$(cat /proc/sys/kernel/random/uuid)"
    mkdir -p "$DIR/osd/ceph-0"
    retry timeout 30 ceph -c "$CONF" osd new "$uuid" 0 >/dev/null
    c ceph-osd -i 0 --mkfs --osd-uuid "$uuid" >>"$DIR/log/mkfs.log" 2>&1
    retry timeout 30 ceph -c "$CONF" osd crush add osd.0 1.0 root=default >/dev/null 2>&1
  fi
  alive "$DIR/run/osd.0.pid" || c ceph-osd -i 0 2>>"$DIR/log/start.log"
  wait_for "ceph-osd" 120 sh -c "timeout 5 ceph -c '$CONF' osd dump | grep -q '^osd.0 up'"

  alive "$DIR/run/rgw.pid" || c radosgw -n "$RGW_NAME" --pid-file "$DIR/run/rgw.pid" 2>>"$DIR/log/start.log"
  wait_for "radosgw" 240 s3_answers

  if ! timeout 30 radosgw-admin -c "$CONF" user info --uid=ckpt >/dev/null 2>&1; then
    retry timeout 30 radosgw-admin -c "$CONF" user create --uid=ckpt --display-name=ckpt \
      --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >/dev/null
  fi
  # A bucket to try s3:// with: s3://ckpt/...
  curl -s -o /dev/null --max-time 10 -X PUT "http://127.0.0.1:$RGW_PORT/ckpt" --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$ACCESS_KEY:$SECRET_KEY" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" || say "could not create bucket ckpt"
  say "S3 on http://127.0.0.1:$RGW_PORT with bucket ckpt (up in $((SECONDS - t0)) s; data in $DIR)"
  print_env
}

stop() {
  local f pid
  for f in rgw.pid osd.0.pid mon.a.pid; do
    if alive "$DIR/run/$f"; then
      pid="$(cat "$DIR/run/$f")"
      kill "$pid"
      for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then say "pid $pid ($f) ignored SIGTERM; sending SIGKILL"; kill -9 "$pid"; fi
      say "stopped ${f%.pid} (pid $pid)"
    fi
    rm -f "$DIR/run/$f"
  done
}

status() {
  local f up=0
  for f in mon.a.pid osd.0.pid rgw.pid; do
    if alive "$DIR/run/$f"; then echo "${f%.pid}: running (pid $(cat "$DIR/run/$f"))"; else echo "${f%.pid}: stopped"; up=1; fi
  done
  if s3_answers; then echo "s3: http://127.0.0.1:$RGW_PORT answers"; else echo "s3: no answer on http://127.0.0.1:$RGW_PORT"; up=1; fi
  return "$up"
}

case "$cmd" in
start) start ;;
stop) stop ;;
status) status ;;
env) print_env ;;
*)
  echo "usage: $0 start|stop|status|env [DIR]" >&2
  exit 2
  ;;
esac

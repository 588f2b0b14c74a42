# Shared shell functions for Caravan's scripts: installing build and test
# dependencies, and running a throwaway etcd on a free loopback port.
# Sourced, not run.

# Runs a command as root, through sudo when not root already.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# What the scripts use, as "test package" pairs: a test that fails when the
# package is missing, and the Debian package that provides it. protoc alone is
# not enough: Caravan's protos import Google's well-known types, which Debian
# ships in libprotobuf-dev, not in protobuf-compiler. The fuzz targets' libFuzzer
# (libfuzzer-sys) is C++. Bridge-mode groups are attached with Debian's CNI
# plugins (/usr/lib/cni), whose firewall and portmap plugins call iptables.
# The fault bench steps one service's wall clock with libfaketime preloaded.
# The fault bench freezes an etcd member's disk through a FUSE passthrough
# mount served by bindfs (which brings fuse3's fusermount3 to unmount it).
REQUIRED_PACKAGES=(
  "command -v protoc:protobuf-compiler"
  "test -f /usr/include/google/protobuf/struct.proto:libprotobuf-dev"
  "command -v etcd:etcd-server"
  "command -v curl:curl"
  "command -v python3:python3"
  "command -v cc:gcc"
  "command -v c++:g++"
  "test -x /usr/lib/cni/bridge:containernetworking-plugins"
  "command -v iptables-save:iptables"
  "command -v ip:iproute2"
  "test -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1:libfaketime"
  "command -v bindfs:bindfs"
)

# Installs whatever REQUIRED_PACKAGES finds missing, then checks again, so a
# package that installed but did not provide what was needed fails here, by
# name, rather than later in a build.
ensure_packages() {
  local missing=() entry
  for entry in "${REQUIRED_PACKAGES[@]}"; do
    eval "${entry%%:*}" >/dev/null 2>&1 || missing+=("${entry##*:}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}" >&2
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  local still=()
  for entry in "${REQUIRED_PACKAGES[@]}"; do
    eval "${entry%%:*}" >/dev/null 2>&1 || still+=("${entry%%:*} (${entry##*:})")
  done
  if [ ${#still[@]} -gt 0 ]; then
    echo "still missing after apt-get install: ${still[*]}" >&2
    return 1
  fi
}

# The compose stack's gateways share one key for Nomad Variables
# (docker/variables.key): made once, random, and kept, since a new key would
# leave the variables written under the old one unreadable. It stays out of
# git; the containers' user must be able to read it.
ensure_compose_variables_key() {
  if [ ! -s docker/variables.key ]; then
    rm -rf docker/variables.key
    head -c 32 /dev/urandom | base64 > docker/variables.key
    chmod 0644 docker/variables.key
  fi
}

# Makes a Python venv at $1 unless one is there; Debian's python3 makes venvs
# with pip only once python3-venv is installed, which this installs if need be.
make_venv() {
  local venv=$1
  [ -x "$venv/bin/python" ] && return 0
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    rm -rf "$venv"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
}

# Prints a TCP port nobody listens on, on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Starts etcd in its own temp dir on free loopback ports, with the settings
# Caravan's deployments give it (docs/services.md, "etcd settings") and a backend
# quota of ETCD_QUOTA_BYTES (default 8 GiB).
# Sets ETCD_ENDPOINT, ETCD_PID and ETCD_DIR; stop it with stop_etcd.
start_etcd() {
  ETCD_DIR=$(mktemp -d -t caravan-etcd.XXXXXX)
  local client peer
  client=$(free_port)
  peer=$(free_port)
  ETCD_ENDPOINT="http://127.0.0.1:${client}"
  etcd --name caravan-test --data-dir "$ETCD_DIR/data" \
    --listen-client-urls "$ETCD_ENDPOINT" --advertise-client-urls "$ETCD_ENDPOINT" \
    --listen-peer-urls "http://127.0.0.1:${peer}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${peer}" \
    --initial-cluster "caravan-test=http://127.0.0.1:${peer}" \
    --max-txn-ops 10000 --max-request-bytes 33554432 --snapshot-count 10000 \
    --quota-backend-bytes "${ETCD_QUOTA_BYTES:-8589934592}" \
    --logger zap --log-level error >"$ETCD_DIR/etcd.log" 2>&1 &
  ETCD_PID=$!
  local i
  for i in $(seq 1 100); do
    if curl -fsS "$ETCD_ENDPOINT/health" 2>/dev/null | grep '"health":"true"' >/dev/null; then
      echo "etcd ready at $ETCD_ENDPOINT (pid $ETCD_PID, dir $ETCD_DIR)" >&2
      return 0
    fi
    if ! kill -0 "$ETCD_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "etcd did not start; its log:" >&2
  cat "$ETCD_DIR/etcd.log" >&2
  return 1
}

# Stops the etcd started by start_etcd and removes its directory.
stop_etcd() {
  if [ -n "${ETCD_PID:-}" ]; then
    kill "$ETCD_PID" 2>/dev/null || true
    wait "$ETCD_PID" 2>/dev/null || true
    ETCD_PID=
  fi
  if [ -n "${ETCD_DIR:-}" ]; then
    rm -rf "$ETCD_DIR"
    ETCD_DIR=
  fi
}

# What scripts/images and the compose test need beyond REQUIRED_PACKAGES:
# Debian's etcd and etcdctl go into the etcd image, dash and coreutils into
# the client-node image; Docker builds and runs the images, docker-compose
# runs the stack.
IMAGE_PACKAGES=(
  "command -v etcd:etcd-server"
  "command -v etcdctl:etcd-client"
  "command -v dash:dash"
  "dpkg -L coreutils:coreutils"
  "command -v ldd:libc-bin"
  "command -v docker:docker.io"
  "command -v docker-compose:docker-compose"
)

# Installs whatever the "test package" pairs given as arguments find missing,
# as ensure_packages does for REQUIRED_PACKAGES.
ensure_package_set() {
  local saved=("${REQUIRED_PACKAGES[@]}") ok=1
  REQUIRED_PACKAGES=("$@")
  ensure_packages || ok=0
  REQUIRED_PACKAGES=("${saved[@]}")
  [ "$ok" = 1 ]
}

# Fails, saying why, unless the Docker daemon answers.
ensure_docker_daemon() {
  if ! docker info >/dev/null 2>&1; then
    echo "the Docker daemon does not answer (docker info); start it, or run as a user in the docker group" >&2
    return 1
  fi
}

# Installs whatever IMAGE_PACKAGES finds missing, then checks that the Docker
# daemon answers.
ensure_image_packages() {
  ensure_package_set "${IMAGE_PACKAGES[@]}" && ensure_docker_daemon
}

# What the docker driver's tests need beyond REQUIRED_PACKAGES: the Docker
# daemon, and the Debian packages scripts/test-images builds their images
# from (busybox-static for busybox:1, redis-server for redis:7).
# (The busybox check reads the whole list: `grep -q` would stop at the first
# match and, under a caller's pipefail, fail the check on busybox's SIGPIPE.)
TEST_IMAGE_PACKAGES=(
  "command -v docker:docker.io"
  "command -v ldd:libc-bin"
  "test -x /bin/busybox && /bin/busybox --list | grep -x httpd >/dev/null:busybox-static"
  "command -v redis-server:redis-server"
)

# Installs whatever TEST_IMAGE_PACKAGES finds missing, then checks that the
# Docker daemon answers.
ensure_test_image_packages() {
  ensure_package_set "${TEST_IMAGE_PACKAGES[@]}" && ensure_docker_daemon
}

# What scripts/ui-test needs beyond REQUIRED_PACKAGES: Debian's Chromium and
# its WebDriver, which Selenium drives headless.
UI_TEST_PACKAGES=(
  "command -v chromium:chromium"
  "command -v chromedriver:chromium-driver"
)

# Installs whatever UI_TEST_PACKAGES finds missing.
ensure_ui_test_packages() {
  ensure_package_set "${UI_TEST_PACKAGES[@]}"
}

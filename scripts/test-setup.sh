#!/usr/bin/env bash
# What the test suite needs from the machine, shared by `npm test` (its pretest step) and .ci/run:
# the Debian packages its tests drive, installed through apt-get when missing, and the shared Redis
# (6379), MariaDB (3306) and PostgreSQL (5432), started when they do not answer. Silent and quick
# (well under a second) when everything is there; one line for what it does or what is missing.
set -euo pipefail

log() { printf '[test-setup] %s\n' "$*"; }
die() { printf '[test-setup] %s\n' "$*" >&2; exit 1; }
has() { command -v "$1" >/dev/null 2>&1; }

# --- packages ------------------------------------------------------------------------------------
# The fault suite skews clocks with libfaketime; redis-server for the Redlock quorum tests' own
# masters; systemd-analyze checks the deploy units; Debian's Chromium for the status page tests
# (playwright-core downloads no browser); the Galera tests start a cluster of their own (galera-4,
# rsync for the state transfer, ss from iproute2 in its SST script, mariadb-install-db); promtool
# checks a real /metrics scrape; the three clients tell whether the shared servers answer.
missing=()
has faketime || missing+=(faketime)
has redis-server || missing+=(redis-server)
has redis-cli || missing+=(redis-tools)
has systemd-analyze || missing+=(systemd)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ -e /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
has rsync || missing+=(rsync)
has ss || missing+=(iproute2)
has mariadb-install-db || missing+=(mariadb-server)
has mariadb || missing+=(mariadb-client)
has psql || missing+=(postgresql-client)
has promtool || missing+=(prometheus)

if [ ${#missing[@]} -gt 0 ]; then
  has apt-get || die "missing Debian packages: ${missing[*]} (no apt-get here to install them)"
  [ "$(id -u)" -eq 0 ] || die "missing Debian packages: ${missing[*]} (as root: apt-get install ${missing[*]})"
  log "installing ${missing[*]} (apt-get)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; } \
    || die "apt-get could not install ${missing[*]} (its output is above)"
fi

# --- services ------------------------------------------------------------------------------------
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
mariadb_up() { mariadb -h 127.0.0.1 -P 3306 -uroot -e 'select 1' >/dev/null 2>&1; }
postgresql_up() { psql -h 127.0.0.1 -p 5432 -U postgres -d postgres -tAc 'select 1' >/dev/null 2>&1; }

started=()
if ! redis_up; then
  log "starting Redis on 6379"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null \
    || die "Redis does not answer on 127.0.0.1:6379 and could not be started"
  started+=(Redis)
fi
if ! mariadb_up; then
  log "starting MariaDB on 3306"
  [ -x /usr/sbin/mariadbd ] || die "MariaDB does not answer on 127.0.0.1:3306 and /usr/sbin/mariadbd is missing"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd \
    || die "MariaDB does not answer on 127.0.0.1:3306 and could not be started"
  started+=(MariaDB)
fi
if ! postgresql_up; then
  log "starting PostgreSQL on 5432"
  version=$(ls /etc/postgresql 2>/dev/null | head -n 1)
  [ -n "$version" ] || die "PostgreSQL does not answer on 127.0.0.1:5432 and no cluster is set up (/etc/postgresql is empty)"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start \
    || die "PostgreSQL does not answer on 127.0.0.1:5432 and could not be started"
  started+=(PostgreSQL)
fi

for name in "${started[@]}"; do
  check="${name,,}_up"
  for _ in $(seq 1 60); do "$check" && continue 2; sleep 1; done
  die "$name was started but does not answer after 60 s"
done

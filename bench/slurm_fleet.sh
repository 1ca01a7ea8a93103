#!/usr/bin/env bash
# A real Slurm run of the fleet example, by hand and outside CI (it installs packages and starts
# daemons), as root on a Debian 12 machine with a built fusor (cmake/bootstrap.sh):
#
#   bench/slurm_fleet.sh [MODEL] [N]      default configs/models/resnet_block.json, 2 shards
#
# It installs slurm-wlm and munge if missing; starts munged and a single-node Slurm cluster
# (slurmctld + slurmd, config under a scratch folder) and a private PostgreSQL server
# (tests/fleet/pg_server.sh); submits examples/fleet/tune.sbatch as an N-task job array into one
# database; waits for it (sbatch --wait); then checks the database: the shards' clusters are
# disjoint and cover the model, and every trial is stored once. Everything it started is stopped
# on exit. Exit status 0 when the checks pass.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
model="$(realpath "${1:-configs/models/resnet_block.json}")"
shards="${2:-2}"
fusor="$(realpath "${FUSOR:-build/tools/fusor}")"
[[ $(id -u) -eq 0 ]] || { echo "run as root: it installs packages and starts daemons" >&2; exit 2; }
[[ -x "$fusor" ]] || { echo "no fusor binary at $fusor: build first (cmake/bootstrap.sh demo)" >&2; exit 2; }

missing=()
for p in slurm-wlm munge postgresql; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
if ((${#missing[@]})); then
    echo "== installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work="$(mktemp -d /tmp/fslurm.XXXX)"
chmod 755 "$work"
pids=()
cleanup() {
    scancel --quiet --name fusor-tune 2>/dev/null || true
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [[ -f "$work/munged.pid" ]] && kill "$(cat "$work/munged.pid")" 2>/dev/null || true
    "$root/tests/fleet/pg_server.sh" stop "$work/pg" || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "== PostgreSQL (tests/fleet/pg_server.sh)"
super="$("$root/tests/fleet/pg_server.sh" start "$work/pg")"
psql -X -q "$super" -c "CREATE DATABASE fleet"
db="${super/\/postgres\?//fleet?}"
echo "database: $db"

echo "== munge"
mkdir -p /run/munge "$work/munge" && chown munge: /run/munge "$work/munge"
[[ -f /etc/munge/munge.key ]] || { mungekey --create --keyfile=/etc/munge/munge.key && chown munge: /etc/munge/munge.key; }
runuser -u munge -- /usr/sbin/munged --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
    --socket=/run/munge/munge.socket.2
cp "$work/munge/munged.pid" "$work/munged.pid"

echo "== Slurm: one node, $(nproc) CPUs"
host="$(hostname -s)"
mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512))
mkdir -p "$work/slurm/ctld" "$work/slurm/d"
export SLURM_CONF="$work/slurm/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=fusor
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
StateSaveLocation=$work/slurm/ctld
SlurmdSpoolDir=$work/slurm/d
SlurmctldPidFile=$work/slurm/slurmctld.pid
SlurmdPidFile=$work/slurm/slurmd.pid
SlurmctldLogFile=$work/slurm/slurmctld.log
SlurmdLogFile=$work/slurm/slurmd.log
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
slurmctld -D -f "$SLURM_CONF" >"$work/slurm/ctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$work/slurm/d.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
    sinfo -h -o %T 2>/dev/null | grep -qE '^idle' && break
    sleep 1
done
sinfo

echo "== sbatch --array=0-$((shards - 1)) examples/fleet/tune.sbatch $model ($shards shards into one database)"
cd "$work"
FUSOR="$fusor" FUSOR_DB="$db" FUSOR_BUDGET=2m \
    sbatch --wait --array="0-$((shards - 1))" --cpus-per-task=1 --no-requeue "$root/examples/fleet/tune.sbatch" "$model" \
    --trials 8 --autoschedulers none --confirm-rounds 0
for f in fusor-tune-*.log; do
    echo "-- $f"
    grep -E "^shard |^cluster|^c[0-9]" "$f" || tail -n 20 "$f"
done

echo "== checking the database"
"$fusor" db list "$db"
total=$(grep -ho "of the model's [0-9]* distinct" fusor-tune-*.log | awk '{print $4}' | sort -u)
covered=$(grep -ho "^shard [0-9]*/$shards: [0-9]* of" fusor-tune-*.log | awk '{s += $3} END {print s}')
workloads=$(psql -X -qtA "$db" -c "SELECT count(DISTINCT signature) FROM trial")
trials=$(psql -X -qtA "$db" -c "SELECT count(*) FROM trial")
unique=$(psql -X -qtA "$db" -c "SELECT count(DISTINCT id) FROM trial")
twice=$(psql -X -qtA "$db" -c "SELECT count(*) FROM (SELECT signature, schedule FROM trial WHERE strategy <> 'confirm'
                                GROUP BY 1, 2 HAVING count(*) > 1) AS d")
echo "model: $total distinct clusters; shards cover $covered; tuned workloads in the database: $workloads;" \
     "trials: $trials ($unique distinct ids); schedules measured twice: $twice"
if [[ "$covered" == "$total" && "$workloads" == "$total" && "$trials" == "$unique" && "$twice" == 0 ]]; then
    echo "PASS: $shards Slurm array tasks tuned disjoint shards that cover the model, into one PostgreSQL database"
else
    echo "FAIL" >&2
    exit 1
fi

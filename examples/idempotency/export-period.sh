#!/bin/sh
# Writes one export file per period: $EXPORT_DIR/<period instant>.csv. Run by export-period.yaml; the
# scheduler sets SCHEDULER_PERIOD, SCHEDULER_PERIOD_KEY, SCHEDULER_RUN_ID, SCHEDULER_DRY_RUN, ...
# Level 3 of "Making your job idempotent" (docs/idempotency.md): the file is written whole under a name of this run,
# then linked under the period's name. `ln` fails when that name exists, so the period is exported once
# whatever runs ask for it, and a reader never sees half a file.
set -eu

dir="${EXPORT_DIR:?EXPORT_DIR is not set}"
period="${SCHEDULER_PERIOD:?not run by the scheduler (SCHEDULER_PERIOD is not set)}"
name="$dir/$(printf '%s' "$period" | tr ':' '-').csv"

if [ "${SCHEDULER_DRY_RUN:-0}" = 1 ]; then
  echo "export-period: dry run: would write $name"
  exit 0
fi

mkdir -p "$dir"
tmp="$dir/.$(basename "$name").$SCHEDULER_RUN_ID.tmp"
trap 'rm -f "$tmp"' EXIT
# The export itself: a stand-in for your query.
printf 'period,period_key,run_id,node\n%s,%s,%s,%s\n' "$period" "$SCHEDULER_PERIOD_KEY" "$SCHEDULER_RUN_ID" "${SCHEDULER_NODE_ID:-}" > "$tmp"
if ln "$tmp" "$name" 2>/dev/null; then
  echo "export-period: wrote $name"
else
  echo "export-period: $name exists already: nothing written"
fi

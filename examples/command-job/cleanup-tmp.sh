#!/bin/sh
# Deletes the files under $CLEANUP_DIR last modified more than $CLEANUP_MAX_AGE_DAYS days ago.
# Run by cleanup-tmp.yaml; the scheduler sets SCHEDULER_PERIOD_KEY, SCHEDULER_ATTEMPT, SCHEDULER_DRY_RUN, ...
# Exit 0: done (also when the folder does not exist). Exit 2: misconfigured. Any other exit is a
# failure the scheduler records (with the last line written to stderr) and retries.
set -eu

dir="${CLEANUP_DIR:-}"
days="${CLEANUP_MAX_AGE_DAYS:-7}"
if [ -z "$dir" ] || [ "$dir" = / ]; then
  echo "cleanup-tmp: CLEANUP_DIR is not set (or is /): refusing to delete anything" >&2
  exit 2
fi
case "$days" in ''|*[!0-9]*) echo "cleanup-tmp: CLEANUP_MAX_AGE_DAYS=$days is not a whole number of days" >&2; exit 2 ;; esac

# On timeout, lease loss or shutdown the scheduler sends SIGTERM to the whole process group.
trap 'echo "cleanup-tmp: stopped by SIGTERM; the next run finishes the job" >&2; exit 143' TERM

if [ ! -d "$dir" ]; then
  echo "cleanup-tmp: $dir does not exist: nothing to do"
  exit 0
fi

minutes=$((days * 24 * 60))
echo "cleanup-tmp: ${SCHEDULER_PERIOD_KEY:-by hand} (attempt ${SCHEDULER_ATTEMPT:-1}): files older than $days days in $dir"
if [ "${SCHEDULER_DRY_RUN:-0}" = 1 ]; then
  # --dry-run: every read, no write.
  find "$dir" -type f -mmin "+$minutes" -print | sed 's/^/would delete: /'
  n=$(find "$dir" -type f -mmin "+$minutes" | wc -l)
  echo "cleanup-tmp: dry run: $((n)) file(s) would be deleted"
else
  n=$(find "$dir" -type f -mmin "+$minutes" -print -delete | wc -l)
  echo "cleanup-tmp: deleted $((n)) file(s)"
fi

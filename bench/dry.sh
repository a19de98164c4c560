# shellcheck shell=bash
# bench/dry.sh — the DRY=1 mode the GPU scripts share (bash; sourced:
# `. "$(dirname "$0")/dry.sh"`): DRY (0 or 1, anything else a usage
# error, exit 2) and x CMD..., which runs CMD or, with DRY=1, prints it
# (shell-quoted, one a line) on the script's standard output.
DRY=${DRY:-0}
if [ "$DRY" != 0 ] && [ "$DRY" != 1 ]; then
  echo "$0: DRY=$DRY: want 0 or 1" >&2
  exit 2
fi
exec 3>&1 # DRY=1: the commands go to the script's standard output
x() {
  if [ "$DRY" = 1 ]; then
    printf '%q ' "$@" | sed 's/ $//' >&3
    echo >&3
    return 0
  fi
  "$@"
}

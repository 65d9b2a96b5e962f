# shellcheck shell=bash
# scripts/workload-args.sh: sourced by the GPU session steps that run a
# workload's binary themselves. args_of FOLDER SECTION prints the args: list
# of the manifest's SECTION (verify or bench), words separated by spaces.
args_of() {
  awk -v s="^$2:" '$0 ~ s {v = 1; next} v && /^  args:/ {print; exit}' "$1/workload.yaml" |
    sed 's/^  args: *\[//; s/\].*//; s/[",]/ /g'
}

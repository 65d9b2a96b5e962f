# scripts/knob-variant.sh: sourced by the GPU session steps that time knob
# settings of a program. knob_variant SRC DST "K=V[,K=V...]" writes SRC to
# DST with each '#define K <old>' line set to V; an entry "s|FROM|TO|"
# instead replaces every FROM (a sed basic regular expression) with TO, for
# variants no knob reaches (e.g. "s|cuco_tx::all_reduce(|ncclAllReduce(|":
# the all-reduces back on host NCCL). Fails (message on stderr) when a knob
# is not there to set or a replacement changes nothing.
knob_variant() {
  local src=$1 dst=$2 sets=$3 expr=() kv p
  IFS=, read -ra kv <<< "$sets"
  for p in "${kv[@]}"; do
    case $p in
      's|'*) expr+=(-e "${p}g") ;;
      *) expr+=(-e "s/^#define ${p%%=*} [^ ]*/#define ${p%%=*} ${p#*=}/") ;;
    esac
  done
  sed "${expr[@]}" "$src" > "$dst"
  for p in "${kv[@]}"; do
    case $p in
      's|'*) ! cmp -s "$src" "$dst" || { echo "knob_variant $dst: $p changes nothing" >&2; return 1; } ;;
      *) grep -q "^#define ${p%%=*} ${p#*=}\b" "$dst" ||
           { echo "knob_variant $dst: ${p%%=*} not set" >&2; return 1; } ;;
    esac
  done
}

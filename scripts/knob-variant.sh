# scripts/knob-variant.sh: sourced by the GPU session steps that time knob
# settings of a program. knob_variant SRC DST "K=V[,K=V...]" writes SRC to
# DST with each '#define K <old>' line set to V; fails (message on stderr)
# when a knob is not there to set.
knob_variant() {
  local src=$1 dst=$2 sets=$3 expr=() kv p
  IFS=, read -ra kv <<< "$sets"
  for p in "${kv[@]}"; do
    expr+=(-e "s/^#define ${p%%=*} [^ ]*/#define ${p%%=*} ${p#*=}/")
  done
  sed "${expr[@]}" "$src" > "$dst"
  for p in "${kv[@]}"; do
    grep -q "^#define ${p%%=*} ${p#*=}\b" "$dst" || { echo "knob_variant $dst: ${p%%=*} not set" >&2; return 1; }
  done
}

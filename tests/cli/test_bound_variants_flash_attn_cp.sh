#!/usr/bin/env bash
# test_bound_variants_flash_attn_cp.sh: the communication-removed and computation-removed
# variants of workloads/flash_attn_cp compile through its manifest (see bound_variants.sh).
exec bash "$(dirname "$0")/bound_variants.sh" flash_attn_cp

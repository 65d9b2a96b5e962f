#!/usr/bin/env bash
# test_bound_variants_kv_transfer.sh: the communication-removed and computation-removed
# variants of workloads/kv_transfer compile through its manifest (see bound_variants.sh).
exec bash "$(dirname "$0")/bound_variants.sh" kv_transfer

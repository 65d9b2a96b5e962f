#!/usr/bin/env bash
# test_bound_variants_moe_dispatch_combine.sh: the communication-removed and computation-removed
# variants of workloads/moe_dispatch_combine compile through its manifest (see bound_variants.sh).
exec bash "$(dirname "$0")/bound_variants.sh" moe_dispatch_combine

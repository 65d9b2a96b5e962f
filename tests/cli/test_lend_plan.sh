#!/usr/bin/env bash
# test_lend_plan.sh: the plan of queries lent between the ranks of an
# attention split (device/lend_plan.cuh, host C++) on synthetic launches:
# who lends to whom and how many queries at 2 and 4 ranks, nothing lent
# without a mask, when a rank cannot take part or when the ranks are nearly
# even, the merge slots and the window's layout. Built with the host C++
# compiler; needs no GPU.
set -u
source "$(dirname "$0")/host_cc.sh"
host_cc_run lend_plan_test

#!/usr/bin/env bash
# test_produce_plan.sh: the producer split's ranges (device/produce_plan.cuh,
# host C++) on synthetic outputs: every unit in one range, in order for an
# all-reduce, step by step over the ranks' parts for a reduce-scatter where
# the ranges and units divide among them (and recognized as such), in order
# otherwise. Built with the host C++ compiler; needs no GPU.
set -u
source "$(dirname "$0")/host_cc.sh"
host_cc_run produce_plan_test

#!/usr/bin/env bash
# test_transform_build_data_p2p.sh: the send/recv and all-to-all programs of
# tests/data/transform (ring_flag_group: a group of point-to-point calls and
# a max that stays NCCL's own; bidir_comms: sends and receives on two
# communicators, which stay host NCCL; ring_allreduce_p2p: a ring all-reduce
# written by hand with grouped sends and receives; disagg: vLLM-style
# prefill and decode ranks, each layer's KV sent as soon as it is made):
# 'cuco transform' (no --no-verify) builds the
# transformed program with the manifest's nvcc command. Without a GPU the
# outcome is exit 3, "built, not verified: no GPU", nothing registered; with
# one it must build, run and verify (exit 0, registered with status ok).
set -u
source "${CUCO_SRC:?}/tests/cli/transform_build.sh"
setup transform-build nvcc
for name in sendrecv_pair alltoall_group broadcast stage_handoff ring_flag_group bidir_comms ring_allreduce_p2p \
    disagg; do
    transform_bg "$CUCO_TEST_DATA/transform/$name"
    built "$name"
done
check "ring_allreduce_p2p: the scratch and the reduced buffer (received at an offset) are symmetric" \
    symmetric ring_allreduce_p2p 72 73
# stage_handoff: the first stage's GEMMs make the buffer it sends (send as
# produced), the second stage's declared kernel consumes the receive piece
# by piece (consume as received); the one-rank path's grouped receive stays
# whole and says why
sh=$TMP/stage_handoff/gen_0/stage_handoff.cu
report=$TMP/stage_handoff/gen_0/transform_report.md
check "stage_handoff: the receive takes its site, the kernel goes through kernel_recv_split" \
    bash -c "grep -q 'cuco_tx::recv(cuco_tx::recv_site(1, CUCO_SPLIT_1), acts,' '$sh' &&
             grep -q 'cuco_tx::kernel_recv_split(1, CUCO_SPLIT_1, cuco_tx::RowSpec{3, 0x5UL, 1, {5, 0, 5}}, rms_gelu,' '$sh'"
check "stage_handoff: the receive moves in pieces" grep -q '^#define CUCO_P2P_PIECES 8 // cuco:knob' "$sh"
check "stage_handoff: the report names both schedules" \
    bash -c "grep -q 'consume_as_received: kernel rms_gelu at line 127 consumes ncclRecv at line 126 piece by piece' '$report' &&
             grep -q 'send_as_produced: ncclSend at line 118' '$report'"
check "stage_handoff: the grouped receive is not split, and says why" \
    grep -q 'consume_as_received does not apply to ncclRecv: inside ncclGroupStart/ncclGroupEnd' "$report"
# windows registered as allocated where one communicator is made once: in
# main (stage_handoff) or by a helper main calls once (sendrecv_pair); the
# cases that keep registration at first use are unit tests (test_transform)
check "stage_handoff: its one communicator, made in main, registers windows as allocated" \
    grep -q '^#define CUCO_TX_ONE_COMM 1' "$sh"
check "sendrecv_pair: a communicator made by a helper main calls once does too" \
    grep -q '^#define CUCO_TX_ONE_COMM 1' "$TMP/sendrecv_pair/gen_0/sendrecv_pair.cu"
check "stage_handoff: builds with CUCO_SPLIT_1=0" knob_built stage_handoff CUCO_SPLIT_1 0
# ring_flag_group: its group stays NCCL's own with every call in it; the
# gradient sum after it goes to the device
rf=$TMP/ring_flag_group/gen_0/ring_flag_group.cu
check "ring_flag_group: the group's calls stay host NCCL" \
    bash -c "grep -q '^    NC(ncclGroupStart());' '$rf' && grep -q '/\* cuco:kept \*/ ncclSend(r.block' '$rf'"
check "ring_flag_group: the gradient sum goes to the device" grep -q "cuco_tx::all_reduce(r.grad, r.grad" "$rf"
bd=$TMP/bidir_comms/gen_0/bidir_comms.cu
check "bidir_comms: both rings stay host NCCL, the sum goes to the device" \
    bash -c "grep -q '/\* cuco:kept \*/ ncclSend(r.grad_out' '$bd' && grep -q 'cuco_tx::all_reduce(r.grad, r.grad' '$bd'"
# disagg: the prefill rank sends each layer's KV as soon as it is made; the
# sends run beside the next layers and wait after the loop; through a
# wrapper, in its caller
check "disagg: the layers' sends wait after their loop" \
    grep -q "ncclSend at line 141 issued on a side stream beside the later iterations of its loop (line 139: 2 independent launches each)" \
    "$TMP/disagg/gen_0/transform_report.md"
check "disagg: the wrapper's send waits in its caller" \
    grep -q "ncclSend at line 83 issued on a side stream, its wait moved after each of the 1 call of send_tensor" \
    "$TMP/disagg/gen_0/transform_report.md"
exit $fail

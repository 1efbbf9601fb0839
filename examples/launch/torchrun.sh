#!/bin/bash
# Trains a dtfm plan under torchrun: one process per GPU on each host,
# `dtfm-run` started directly (--no-python). Run this on every host with its
# NODE_RANK; the plan's device count must be NNODES x NPROC.
#
#   MASTER_ADDR=node0 NODE_RANK=0 examples/launch/torchrun.sh plan.pb --steps 100
#
# Each process reads RANK, WORLD_SIZE, LOCAL_RANK (its GPU), MASTER_ADDR
# and TORCHELASTIC_RUN_ID. With torchrun's static rendezvous (below) its
# agent holds MASTER_PORT with its own store, so dtfm's rank 0 serves the
# rendezvous on MASTER_PORT + 1: open both ports between the hosts. Every
# process proves the job token (the same on every host) to that store:
#
#   export DTFM_JOB_TOKEN=$(dtfm-run --new-job-token)   # once, then share it
set -euo pipefail
: "${DTFM_JOB_TOKEN:?export the same DTFM_JOB_TOKEN on every host (dtfm-run --new-job-token makes one)}"
plan=${1:?usage: torchrun.sh PLAN [dtfm-run --execute options]}
shift
exec torchrun --nnodes="${NNODES:-2}" --nproc-per-node="${NPROC:-4}" \
    --node-rank="${NODE_RANK:?set NODE_RANK}" \
    --master-addr="${MASTER_ADDR:?set MASTER_ADDR}" \
    --master-port="${MASTER_PORT:-29500}" \
    --rdzv-id="${RUN_ID:-dtfm}" --max-restarts=0 \
    --no-python "${DTFM_RUN:-dtfm-run}" "$plan" --execute "$@"

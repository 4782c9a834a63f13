#!/bin/bash
# A stand-in for a checkpointed training job: one "step" per second, and after
# every step the step counter is checkpointed to $TRAIN_DIR/<job id>.ckpt
# (written to a temporary file, then renamed, so a kill never leaves a torn
# checkpoint). On start it resumes from that checkpoint if there is one, so a
# job that Slurm requeues (--requeue) continues where it left off.
# Every start is logged to $TRAIN_DIR/<job id>.log as
#   start <epoch s> node=<node> restart_count=<SLURM_RESTART_COUNT> from_step=<n> pid=<pid>
# which is how bench.py tells a resume from a restart from scratch.
set -u
dir=${TRAIN_DIR:?TRAIN_DIR not set}
ck=$dir/$SLURM_JOB_ID.ckpt
log=$dir/$SLURM_JOB_ID.log
step=0
if [ -s "$ck" ]; then step=$(cat "$ck"); fi
echo "start $(date +%s.%N) node=${SLURMD_NODENAME:-?} restart_count=${SLURM_RESTART_COUNT:-0} from_step=$step pid=$$" >> "$log"
trap 'echo "term $(date +%s.%N) node=${SLURMD_NODENAME:-?} step=$step" >> "$log"; exit 143' TERM
while :; do
  sleep 1 & wait $!
  step=$((step + 1))
  echo "$step" > "$ck.tmp.$$" && mv -f "$ck.tmp.$$" "$ck"
done

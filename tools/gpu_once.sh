#!/usr/bin/env bash
# The one call to make on a lent GPU machine (README, "The GPU check"): records the machine,
# installs the carried bundle (carry/, built here by tools/gpu_carry.py), runs gpu_check's trainer
# part at the quick profile's shapes, then, if time is left, at the paper profile's, and writes
# everything under $OUT. It keeps to its own clock: GPU_ONCE_BUDGET_S (default 450 s, under the
# 8 minutes that let a rerun fit a 15-minute device budget); each check gets what is left, less
# a margin, as its part timeout, and a check past it is reported timed out in its JSON.
#
#   OUT=/tmp/out bash tools/gpu_once.sh           # on the GPU machine, from the repository root
#   OUT=/tmp/out bash tools/gpu_once.sh --tiny    # the same path on CPU, tiny sizes
#
# Files under $OUT: machine.txt (nvidia-smi, disk, memory), machine.json (GPU, driver, compute
# capability, CUDA runtime, Python, torch), pip-list.txt, quick.json and paper.json (gpu_check's
# JSON: --gpu-constants reads quick.json), each check's log, and gpu_once.json (what ran, its exit
# code and wall time). Exit: the quick check's exit code (the paper one is a bonus).
#
# Shapes: the profile's prompt budget, completion cap, group and micro-batch, with a generation
# batch of two micro-batches' worth of groups (GPU_ONCE_QUICK_BATCH 16, GPU_ONCE_PAPER_BATCH 8)
# instead of the profile's 64 / 512: the rate is per trained token, and a full paper generation
# batch (512 completions of 9,216 tokens) would take the whole budget. Steps: GPU_ONCE_STEPS (2).
set -uo pipefail
start=$(date +%s)
budget=${GPU_ONCE_BUDGET_S:-450}
out="${OUT:-$PWD/gpu_once_out}"
python="${PYTHON:-python3}"
steps=${GPU_ONCE_STEPS:-2}
margin=15 # seconds kept for writing the JSON and the summary after a check's timeout
tiny=()
quick_batch=${GPU_ONCE_QUICK_BATCH:-16}
paper_batch=${GPU_ONCE_PAPER_BATCH:-8}
if [ "${1:-}" = "--tiny" ]; then # CPU: the tiny shape (group 2, micro-batch 2)
  tiny=(--tiny)
  quick_batch=4
  paper_batch=4
fi
out="$(mkdir -p "$out" && cd "$out" && pwd)" # absolute: carry/run.sh runs from its own folder
left() { echo $((budget - ($(date +%s) - start))); }
say() { echo "gpu_once: $*" | tee -a "$out/gpu_once.log" >&2; }

# 1. the machine (each probe bounded: a hung nvidia-smi costs 20 s, not the budget)
{
  date -u
  uname -a
  echo "cpus: $(nproc)"
  free -g
  df -h "$out" /tmp "$PWD"
  timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,memory.used \
    --format=csv || echo "nvidia-smi: none or failed"
  timeout 20 nvidia-smi || true
} >"$out/machine.txt" 2>&1
timeout 60 "$python" - >"$out/machine.json" 2>>"$out/gpu_once.log" <<'PY' || say "machine.json: torch did not answer"
import json, platform, sys
info = {"python": sys.version.split()[0], "platform": platform.platform()}
try:
    import torch
    info.update(torch=torch.__version__, cuda_runtime=torch.version.cuda,
                cudnn=torch.backends.cudnn.version(), cuda_available=torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, compute_capability=f"{p.major}.{p.minor}",
                    memory_gib=round(p.total_memory / 1024**3, 1),
                    gpus=torch.cuda.device_count())
except Exception as e:  # a machine without torch: say so, the check will name what it lacks
    info["torch_error"] = f"{type(e).__name__}: {e}"
print(json.dumps(info, indent=2))
PY
timeout 60 "$python" -m pip list --format=freeze >"$out/pip-list.txt" 2>&1 || true

# 2. the bundle: carry/run.sh installs its wheels beside the machine's packages and runs the
# check from the carried project; without a bundle, the check runs from this checkout
if [ -f carry/run.sh ]; then
  check=(bash carry/run.sh)
  say "bundle: carry/ ($(du -sh carry | cut -f1))"
else
  check=(env "PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}" "$python" benchmarks/gpu_check.py)
  say "no carry/ bundle: running from this checkout with the machine's own packages"
fi

# 3. the checks, each bounded by what is left of the budget
codes=()
run_check() { # name profile generation-batch
  local name=$1 profile=$2 batch=$3 timeout
  timeout=$(($(left) - margin))
  if [ "$timeout" -lt 60 ]; then
    say "$name: skipped, $(left) s left of $budget"
    codes+=("\"$name\": \"skipped\"")
    return 0
  fi
  say "$name: $profile, generation batch $batch, $steps steps, part timeout $timeout s"
  local t0=$(date +%s)
  timeout $((timeout + margin)) "${check[@]}" --trainer-only "${tiny[@]}" --profile "$profile" \
    --generation-batch "$batch" --steps "$steps" --part-timeout "$timeout" \
    --output "$out/$name.json" >"$out/$name.log" 2>&1
  local code=$?
  say "$name: exit $code in $(($(date +%s) - t0)) s"
  codes+=("\"$name\": $code")
  return $code
}
run_check quick params/qwen3-4b-quick.yaml "$quick_batch"
quick=$?
run_check paper params/qwen3-4b-paper.yaml "$paper_batch"

wall=$(($(date +%s) - start))
joined=$(IFS=,; echo "${codes[*]}")
printf '{"wall_s": %d, "budget_s": %d, "steps": %d, "tiny": %s, "exit": {%s}}\n' \
  "$wall" "$budget" "$steps" "$([ ${#tiny[@]} -gt 0 ] && echo true || echo false)" "$joined" \
  >"$out/gpu_once.json"
say "done in $wall s (budget $budget s); results in $out"
exit $quick

#!/usr/bin/env bash
# GPU check of arlkit inside verl (docs/scale-out.md): three verl steps of the FrozenLake BudgetMix example
# (examples/verl/run_budgetmix_frozenlake.sh: arlkit's agent loop, arlkit_gigpo in arlkit's trainer mode,
# arlkit_vanilla) on the embedded micro model, built offline, on one GPU; meant to take under 8 minutes.
# It fails unless every step logged a finite policy loss, arlkit's loss and trainer hook left their
# metrics (stab/seq/*, arlkit/adv/*), and the agent loop recorded BudgetMix trajectories.
#
# Needs one CUDA GPU and, importable by $PYTHON: arlkit[verl], verl 0.9.1 and vLLM (not part of `make test`;
# the project's tests need no GPU). Usage: bash scripts/gpu_check_verl.sh [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=${1:-$(mktemp -d -t arlkit-gpu-check-XXXXXX)}
mkdir -p "$WORK"

for module in arlkit verl vllm ray transfer_queue; do
  "$PYTHON" -c "import $module" 2>/dev/null || {
    echo "gpu_check_verl: $PYTHON cannot import $module; install arlkit[verl], verl==0.9.1 and vllm first" >&2; exit 2; }
done
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo "gpu_check_verl: no CUDA device is visible" >&2; exit 2; }

echo "gpu_check_verl: work folder $WORK"
"$PYTHON" -m arlkit model init --size micro --seed 0 --out "$WORK/model"
export ARLKIT_VERL_TRAJECTORIES="$WORK/trajectories"
start=$(date +%s)
MODEL="$WORK/model" GPUS=1 ROWS=64 VAL_ROWS=8 STEPS=3 DATA_DIR="$WORK/data" RUN=gpu-check PYTHON="$PYTHON" \
  bash examples/verl/run_budgetmix_frozenlake.sh \
    data.train_batch_size=8 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.gpu_memory_utilization=0.3 actor_rollout_ref.model.use_remove_padding=false \
    trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 \
    trainer.default_local_dir="$WORK/checkpoints" 2>&1 | tee "$WORK/train.log"
echo "gpu_check_verl: training took $(( $(date +%s) - start )) s"

"$PYTHON" - "$WORK" <<'EOF'
import json, math, re, sys
from pathlib import Path

from arlkit.budgets import budget_candidates
from arlkit.integrations.verl_data import read_rows

work = Path(sys.argv[1])
steps = {}
for line in (work / "train.log").read_text(errors="replace").splitlines():
    found = re.match(r"step:(\d+) - (.*)", line.strip())  # verl's console logger: step:N - key:value - ...
    if found:
        steps[int(found.group(1))] = dict(part.rpartition(":")[::2] for part in found.group(2).split(" - "))
problems = []
if len(steps) < 3:
    problems.append(f"{len(steps)} logged steps, expected 3")
for step, metrics in sorted(steps.items()):
    loss = metrics.get("actor/pg_loss")
    if loss is None or not math.isfinite(float(loss)):
        problems.append(f"step {step}: actor/pg_loss is {loss}")
    if not any(k.startswith("arlkit/adv/") for k in metrics):
        problems.append(f"step {step}: no arlkit/adv/* metric (the arlkit trainer mode's advantage step did not run)")
    if not any(k.startswith("actor/stab/seq/") or k.startswith("stab/seq/") for k in metrics):
        problems.append(f"step {step}: no stab/seq/* metric (arlkit_vanilla was not the policy loss)")
records = [json.loads(line) for f in sorted((work / "trajectories").glob("*.jsonl")) for line in f.read_text().splitlines()]
if len(records) < 3 * 8 * 4:
    problems.append(f"{len(records)} trajectories recorded, expected at least {3 * 8 * 4}")
t_max = int(read_rows(work / "data" / "train.parquet")[0]["extra_info"]["t_max"])
off = [r["budget"] for r in records if r["budget"] not in budget_candidates(t_max)]
if off:
    problems.append(f"budgets outside BudgetMix's candidates: {sorted(set(off))}")
print(f"gpu_check_verl: {len(steps)} steps; pg_loss "
      f"{[steps[s].get('actor/pg_loss') for s in sorted(steps)]}; {len(records)} trajectories, "
      f"success {sum(r.get('success', False) for r in records)}/{len(records)}, budgets {sorted({r['budget'] for r in records})}")
if problems:
    print("gpu_check_verl: FAILED\n  " + "\n  ".join(problems))
    sys.exit(1)
print("gpu_check_verl: PASSED")
EOF

#!/usr/bin/env bash
# BudgetMix on FrozenLake with verl (RT §5.2): one budget per task group drawn from the BudgetMix
# candidates and announced in every prompt; GiGPO with (state, remaining budget) anchors over one
# row per step, in arlkit's trainer mode; arlkit's clipped policy loss. Knobs: common.sh.
#   bash examples/verl/run_budgetmix_frozenlake.sh                 # Qwen3-0.6B on one GPU
#   MODEL_SIZE=4b bash examples/verl/run_budgetmix_frozenlake.sh   # Qwen3-4B on 8 GPUs
#   DRY_RUN=1 bash examples/verl/run_budgetmix_frozenlake.sh       # print verl's configuration only
RUN=${RUN:-budgetmix-frozenlake}
: "${DATA_DIR:=$HOME/data/arlkit/$RUN}"
source "$(dirname "$0")/common.sh"

budgetmix_data step 1000 100 --env frozenlake --env-arg size=4 --history 2
PROMPT_LEN=2048 RESPONSE_LEN=512 arlkit_train "${GIGPO_STEP_ROWS[@]}" actor_rollout_ref.actor.loss_agg_mode=token-mean "$@"

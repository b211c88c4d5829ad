#!/usr/bin/env bash
# BudgetMix on Sokoban with verl: as run_budgetmix_frozenlake.sh (GiGPO with (state, remaining budget)
# anchors, one row per step, arlkit's trainer mode), on arlkit's Sokoban boards. Knobs: common.sh.
#   bash examples/verl/run_budgetmix_sokoban.sh
RUN=${RUN:-budgetmix-sokoban}
: "${DATA_DIR:=$HOME/data/arlkit/$RUN}"
source "$(dirname "$0")/common.sh"

budgetmix_data step 1000 100 --env sokoban --history 2
PROMPT_LEN=2048 RESPONSE_LEN=512 arlkit_train "${GIGPO_STEP_ROWS[@]}" "$@"

#!/usr/bin/env bash
# BudgetMix on text-to-SQL with verl, RT's GRPO layout: one row per trajectory (token ids carried
# across turns, query results masked out of the loss), budget counters after each observation so the
# conversation only grows, arlkit's GRPO on the trajectory score; any v1 trainer mode works. The SQL
# environment runs queries in arlkit's sandbox on each Ray worker. Knobs: common.sh.
#   bash examples/verl/run_budgetmix_sql.sh
RUN=${RUN:-budgetmix-sql}
: "${DATA_DIR:=$HOME/data/arlkit/$RUN}"
source "$(dirname "$0")/common.sh"

budgetmix_data trajectory 160 38 --env sql --counters observation
PROMPT_LEN=4096 RESPONSE_LEN=6144 arlkit_train \
  algorithm.adv_estimator=arlkit_grpo trainer.use_v1=true \
  actor_rollout_ref.actor.policy_loss.loss_mode=arlkit_vanilla \
  actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean \
  "$@"

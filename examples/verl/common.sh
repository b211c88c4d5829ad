# Shared by the launchers in this folder (sourced, not run): the model-size presets, the data step
# and verl's overrides that every arlkit launch needs (docs/scale-out.md).
#
# Knobs (environment variables):
#   MODEL_SIZE  0.6b (one GPU, Qwen3-0.6B) or 4b (8 GPUs, Qwen3-4B)          default 0.6b
#   MODEL       a Hugging Face id or local checkpoint; overrides MODEL_SIZE's
#   GPUS        GPUs per node; NNODES nodes                                 defaults from MODEL_SIZE, 1
#   DATA_DIR    where the parquet files go                                 default ~/data/arlkit/$RUN
#   ROWS        training rows (task groups); VAL_ROWS validation rows      defaults 4096, 256
#   STEPS       training steps                                             default 200
#   DRY_RUN=1   print the configuration verl composes, and stop (no GPU needed)
# Extra arguments to a launcher are appended to verl's overrides (key=value, Hydra syntax).

set -euo pipefail

: "${MODEL_SIZE:=0.6b}"
case "$MODEL_SIZE" in
  0.6b) : "${MODEL:=Qwen/Qwen3-0.6B}"; : "${GPUS:=1}"; TP=1; BATCH=16; MINI=16; MICRO=8; MEM=0.45 ;;
  4b)   : "${MODEL:=Qwen/Qwen3-4B}";   : "${GPUS:=8}"; TP=2; BATCH=64; MINI=32; MICRO=4; MEM=0.5 ;;
  *) echo "MODEL_SIZE must be 0.6b or 4b, got '$MODEL_SIZE'" >&2; exit 2 ;;
esac
: "${NNODES:=1}" "${ROWS:=4096}" "${VAL_ROWS:=256}" "${STEPS:=200}" "${DRY_RUN:=0}"
PYTHON=${PYTHON:-python3}

# rows for verl: `arlkit verl data` with the launcher's options; $1 is the file name, the rest its options
arlkit_data() {
  local out="$DATA_DIR/$1"; shift
  mkdir -p "$DATA_DIR"
  if [ "$DRY_RUN" = 1 ] && [ -f "$out" ]; then return 0; fi
  "$PYTHON" -m arlkit verl data --out "$out" "$@" >/dev/null
}

# BudgetMix training rows and full-budget validation rows: budgetmix_data LAYOUT TRAIN_TASKS VAL_TASKS ENV_OPTIONS...
budgetmix_data() {
  local layout=$1 train_tasks=$2 val_tasks=$3; shift 3
  arlkit_data train.parquet "$@" --budget budgetmix --groups "$ROWS" --tasks "$train_tasks" --layout "$layout"
  arlkit_data val.parquet "$@" --split test --budget full --groups "$VAL_ROWS" --tasks "$val_tasks" --layout "$layout"
}

# RT's BudgetMix recipe on step rows: GiGPO with (state, remaining budget) anchors in arlkit's trainer mode,
# arlkit's clipped policy loss
GIGPO_STEP_ROWS=(algorithm.adv_estimator=arlkit_gigpo trainer.use_v1=true trainer.v1.trainer_mode=arlkit
                 actor_rollout_ref.actor.policy_loss.loss_mode=arlkit_vanilla)

# verl's PPO trainer with the overrides every arlkit launch shares, then the launcher's, then the caller's
arlkit_train() {
  local loops
  loops=$("$PYTHON" -c "from arlkit.integrations.verl_data import AGENT_LOOP_CONFIG; print(AGENT_LOOP_CONFIG)")
  local common=(
    "data.train_files=$DATA_DIR/train.parquet" "data.val_files=$DATA_DIR/val.parquet"
    "data.train_batch_size=$BATCH" "data.max_prompt_length=${PROMPT_LEN:-4096}" "data.max_response_length=${RESPONSE_LEN:-1024}"
    "actor_rollout_ref.model.path=$MODEL" "actor_rollout_ref.model.use_remove_padding=true"
    "actor_rollout_ref.actor.optim.lr=1e-6" "actor_rollout_ref.actor.ppo_mini_batch_size=$MINI"
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=$MICRO"
    "actor_rollout_ref.actor.use_kl_loss=true" "actor_rollout_ref.actor.kl_loss_coef=0.01"
    "actor_rollout_ref.actor.kl_loss_type=low_var_kl"
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=$MICRO"
    "actor_rollout_ref.rollout.name=${ROLLOUT:-vllm}" "actor_rollout_ref.rollout.n=8"
    "actor_rollout_ref.rollout.tensor_model_parallel_size=$TP" "actor_rollout_ref.rollout.gpu_memory_utilization=$MEM"
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=$MICRO"
    "actor_rollout_ref.rollout.agent.agent_loop_config_path=$loops"
    "algorithm.use_kl_in_reward=false"
    "trainer.n_gpus_per_node=$GPUS" "trainer.nnodes=$NNODES" "trainer.total_training_steps=$STEPS"
    "trainer.project_name=arlkit" "trainer.experiment_name=$RUN" "trainer.logger=[console]"
    "trainer.save_freq=50" "trainer.test_freq=25" "trainer.val_before_train=true"
  )
  if [ "$DRY_RUN" = 1 ]; then
    "$PYTHON" -m verl.trainer.main_ppo --cfg job "${common[@]}" "$@"
  else
    "$PYTHON" -m verl.trainer.main_ppo "${common[@]}" "$@"
  fi
}

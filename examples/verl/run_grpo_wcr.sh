#!/usr/bin/env bash
# GRPO on searchgym Solver tasks with the Waypoint Coverage Reward, in verl 0.9.1 (1 node, 8 GPUs, vLLM).
# The agent loop plays KGSolver-v0 itself (tag protocol, BM25 over the world, WCR from the env's
# wrapper) and sets the reward, so no custom_reward_function is needed.
#   pip install -e ".[verl]" && pip install --no-deps verl==0.9.1 && pip install vllm
#   python examples/verl/make_data.py --out data/searchgym        # 112 train + 16 val rows
#   bash examples/verl/run_grpo_wcr.sh [extra hydra overrides]
# Batches: 16 prompts x 5 rollouts per step, 112 rows -> 7 steps per epoch, 3 epochs (21 steps). The
# micro batches divide every per-GPU share (80 rollouts / 8 GPUs = 10 for log-probs, 40 / 8 = 5 per PPO
# mini batch); with other GPU counts keep train_batch_size * rollout.n divisible by them.
# Logs to the console; add trainer.logger='[console,wandb]' for Weights & Biases.
# Self-play instead: make_data.py --selfplay (rollout.n stays 5 = group_size).
# Search-R1 / FlashRAG questions: make_data.py --flashrag/--parquet (searchgym_qa rows, exact match), or
# Search-R1's own parquet with actor_rollout_ref.rollout.agent.default_agent_loop=searchgym_qa.
# PYTHON: the interpreter to run verl with (default python3).
set -euo pipefail
DATA=${DATA:-data/searchgym}
MODEL=${MODEL:-Qwen/Qwen2.5-3B-Instruct}
"${PYTHON:-python3}" -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files="$DATA/train.parquet" data.val_files="$DATA/val.parquet" \
  data.return_raw_chat=True data.train_batch_size=16 \
  data.max_prompt_length=1024 data.max_response_length=3072 \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2 \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=5 \
  actor_rollout_ref.rollout.agent.num_workers=8 \
  actor_rollout_ref.rollout.agent.agent_loop_config_path=examples/verl/agent_loops.yaml \
  trainer.n_gpus_per_node=8 trainer.nnodes=1 trainer.total_epochs=3 \
  trainer.logger='[console]' \
  trainer.project_name=searchgym trainer.experiment_name=grpo_wcr \
  "$@"
# Keeping verl's own tool loop and SearchTool instead (retrieval from `searchgym serve --port 8000`,
# tool config retrieval_service_url: http://127.0.0.1:8000/retrieve): score with searchgym's env +
# wrappers by adding
#   custom_reward_function.path=searchgym/integrations/verl/reward.py custom_reward_function.name=compute_score

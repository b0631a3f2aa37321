"""Training the unified judge: rollouts → Pref./Refl. mix (`mix`), the reward (`reward`), the
format warm-up (`sft`) and GRPO with QLoRA (`grpo`), thin set-ups over TRL."""

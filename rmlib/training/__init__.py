"""Training the unified judge: rollouts → Pref./Refl. mix (`mix`), the reward (`reward`), the
format warm-up (`sft`) and GRPO with LoRA, QLoRA on an nf4 base (`grpo`), thin set-ups over TRL."""

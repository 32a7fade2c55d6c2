"""A Hugging Face Trainer on a tiny BERT built from a config (random weights, nothing downloaded), with the
workbench's HFProgress callback."""

from __future__ import annotations

import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from runformat.callbacks import HFProgress

config = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16, num_labels=2)  # fmt: skip


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 128

    def __getitem__(self, index: int) -> dict:
        ids = torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(index))
        return {"input_ids": ids, "labels": int(ids[0] % 2)}


arguments = TrainingArguments(
    output_dir=sys.argv[1], max_steps=int(sys.argv[2]), per_device_train_batch_size=8, logging_steps=5,
    report_to=[], save_strategy="no", use_cpu=True,
)  # fmt: skip
torch.manual_seed(0)
trainer = Trainer(model=BertForSequenceClassification(config), args=arguments, train_dataset=Tokens(),
                  callbacks=[HFProgress()])  # fmt: skip
trainer.train()

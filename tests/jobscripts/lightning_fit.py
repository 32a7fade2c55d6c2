"""A tiny PyTorch Lightning module trained by Lightning's Trainer, with the workbench's LightningProgress
callback; then the same fit again under Lightning's tqdm bar (the default where rich is not installed), so
one run has both bars' real lines (a marker line between them)."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

from runformat.callbacks import LightningProgress


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def fit(callbacks: list) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(256, 8, generator=generator)
    loader = DataLoader(TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=16)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_model_summary=False,
                        accelerator="cpu", callbacks=callbacks)  # fmt: skip
    trainer.fit(Tiny(), loader)


fit([LightningProgress()])
print("=== the same fit under the tqdm bar ===", flush=True)
fit([TQDMProgressBar()])
